"""Measure verifier-tiny through the reference engine's HTTP server (BF16 and quantized variants).

    python -m training.evaluate --n 300 --agent --out training/eval_results.json

Why a script of its own: it checks the shipped model against the *suite's expected answers* (not
against a reference endpoint), the quality bar of issue #5, and it can run before the whole verifier
pipeline is wired. It reuses the suite loader, the tool-call checks and the statistics of the verifier
so the figures mean the same thing as in a verifier report:

- toolcall-core (held-out eval phrasings): trigger precision/recall/F1 (positive = a tool call was
  expected / made), schema accuracy (calls whose arguments parse and validate against the offered
  tool's schema, over all calls made), tool-name accuracy and BFCL-style argument agreement (over the
  cases that expect a call), case accuracy; Wilson intervals, bootstrap for F1.
- agent-smoke scenarios (seed 0, never used in training) driven step by step; task success.
- each quantized variant vs BF16: paired difference in case correctness (Newcombe CI, McNemar p).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from reference_engine.launch import start_server
from verifier.http.client import EndpointClient
from verifier.kinds.agent.kind import Conversation, is_context_error, send_step
from verifier.kinds.toolcall.checks import args_bfcl_equal, check_call
from verifier.kinds.toolcall.scoring import f1_interval
from verifier.kinds.toolcall.suite_format import ToolcallCase, load_jsonl, parse_case
from verifier.records import EndpointConfig
from verifier.stats import intervals as stats

CORE_SUITE = Path(__file__).resolve().parents[1] / "suites" / "toolcall" / "data" / "toolcall-core.jsonl"

#: what MODEL_CARD.md reports: the first N toolcall-core cases and these agent seeds (training.select validates on
#: the cases and seeds after them, so a checkpoint chosen there is not chosen on the reported figures)
REPORTED_CASES = 300
REPORTED_AGENT_SEEDS = (0, 1, 2, 3, 4)

#: base_url -> served model id (set when a server starts)
MODEL_ID: dict[str, str] = {}

#: name -> start_server options
VARIANTS: dict[str, dict[str, Any]] = {
    "bf16": {},
    "fp8kv": {"kv_dtype": "fp8"},
    "int4": {"decode_weights": "int4"},
    "fp8kv+int4": {"kv_dtype": "fp8", "decode_weights": "int4"},
}


@dataclass
class CaseResult:
    case_id: str
    expected_tool: str | None
    called: bool
    name: str | None = None
    valid: bool = False
    args_match: bool = False
    error: str | None = None
    content: str | None = None
    arguments: str | None = None  # the call's raw arguments text, kept for reading failures

    @property
    def correct(self) -> bool:
        if self.expected_tool is None:
            return not self.called
        return self.called and self.name == self.expected_tool and self.valid and self.args_match

    @property
    def transport_failed(self) -> bool:
        """No reply came back at all (the request failed), so the case says nothing about the model."""
        return bool(self.error) and not self.called and self.content is None

    @property
    def outcome(self) -> str:
        """The first thing that went wrong, in the order a reader checks a reply (``correct`` if nothing)."""
        if self.transport_failed:
            return "transport_error"
        if self.expected_tool is None:
            return "unwanted_call" if self.called else "correct"
        if not self.called:
            return "call_missed"
        if self.name != self.expected_tool:
            return "wrong_tool"
        if not self.valid:
            return "invalid_arguments"
        return "correct" if self.args_match else "wrong_argument_values"


@dataclass
class AgentResult:
    scenario: str
    horizon: int
    success: bool
    steps: int
    invalid_steps: int
    stop: str
    transcript: list[str] = field(default_factory=list)
    trimmed_turns: int = 0  # turns dropped to keep the prompt inside the model's context


async def _chat(client: httpx.AsyncClient, base_url: str, body: dict[str, Any]) -> dict[str, Any]:
    r = await client.post(f"{base_url}/chat/completions", json={"model": MODEL_ID[base_url], **body})
    r.raise_for_status()
    return r.json()


def _first_call(resp: dict[str, Any]) -> tuple[str | None, str | None, str | None]:
    msg = resp["choices"][0]["message"]
    calls = msg.get("tool_calls") or []
    if not calls:
        return None, None, msg.get("content")
    fn = calls[0].get("function") or {}
    return fn.get("name"), fn.get("arguments") or "", msg.get("content")


async def run_toolcall(base_url: str, cases: list[ToolcallCase], concurrency: int = 8) -> list[CaseResult]:
    sem = asyncio.Semaphore(concurrency)

    async def one(client: httpx.AsyncClient, case: ToolcallCase) -> CaseResult:
        body = {k: v for k, v in case.body.items() if k not in ("stream",)}
        body["temperature"] = 0
        body.setdefault("max_tokens", 256)
        expected = case.expected.tool if case.expected else None
        async with sem:
            try:
                resp = await _chat(client, base_url, body)
            except httpx.HTTPError as exc:
                return CaseResult(case.id, expected, False, error=f"{type(exc).__name__}: {exc}"[:200])
        name, args, content = _first_call(resp)
        if name is None:
            return CaseResult(case.id, expected, False, content=content)
        check = check_call(name, args or "", case.tools())
        want = case.expected
        match = want is not None and check.valid and name == want.tool and args_bfcl_equal(check.arguments,
                                                                                           want.arguments)
        return CaseResult(case.id, expected, True, name=name, valid=check.valid, args_match=match,
                          error=check.error, content=content, arguments=args)

    async with httpx.AsyncClient(timeout=600) as client:
        return list(await asyncio.gather(*(one(client, c) for c in cases)))


def failure_breakdown(results: list[CaseResult], cases: list[ToolcallCase]) -> dict[str, dict[str, int]]:
    """Outcome counts per kind of case (tool request, small talk, request for a tool that is not offered).

    Why: the headline rates say *that* the model misses, this says *where*, so a retrain can be aimed and
    its effect read off the same 300 cases.
    """
    kinds = {c.id: next((t.split(":", 1)[1] for t in c.tags if t.startswith("no_tool:")), "tool") for c in cases}
    out: dict[str, dict[str, int]] = {}
    for r in results:
        row = out.setdefault(kinds.get(r.case_id, "tool"), {})
        row[r.outcome] = row.get(r.outcome, 0) + 1
    return {k: dict(sorted(v.items())) for k, v in sorted(out.items())}


def training_like_cases(n: int, seed: int = 4242) -> list[ToolcallCase]:
    """``n`` fresh cases worded from the *training* templates (a seed the corpus never uses).

    Why: when the model misses on the held-out phrasings, this tells underfitting (it misses here too)
    from failing to generalise (it is right here), which calls for different fixes.
    """
    from suites.toolcall.catalog import generate_cases
    from training.phrasings import TRAIN_PHRASINGS

    pairs = generate_cases(seed, n, TRAIN_PHRASINGS, no_tool_share=0.3)
    return [parse_case({**body, "_meta": {**meta, "id": f"train-like-{i}"}}, "training-like cases", None)
            for i, (body, meta) in enumerate(pairs)]


def toolcall_metrics(results: list[CaseResult]) -> dict[str, Any]:
    ok = [r for r in results if not r.transport_failed]
    tp = [r.expected_tool is not None and r.called for r in ok]
    fp = [r.expected_tool is None and r.called for r in ok]
    fn = [r.expected_tool is not None and not r.called for r in ok]
    f1 = f1_interval(tp, fp, fn, [r.case_id for r in ok])
    calls = [r for r in ok if r.called]
    want = [r for r in ok if r.expected_tool is not None]
    return {
        "n_cases": len(results),
        "n_errors": len(results) - len(ok),
        "trigger_f1": f1.model_dump(),
        "trigger_precision": stats.wilson(sum(tp), sum(tp) + sum(fp)).model_dump(),
        "trigger_recall": stats.wilson(sum(tp), sum(tp) + sum(fn)).model_dump(),
        "schema_accuracy": stats.wilson(sum(r.valid for r in calls), len(calls)).model_dump(),
        "tool_name_accuracy": stats.wilson(sum(r.called and r.name == r.expected_tool for r in want),
                                           len(want)).model_dump(),
        "args_bfcl_accuracy": stats.wilson(sum(r.args_match for r in want), len(want)).model_dump(),
        "case_accuracy": stats.wilson(sum(r.correct for r in ok), len(ok)).model_dump(),
    }


async def run_agent(base_url: str, scenarios: list[Any], max_tokens: int = 128) -> list[AgentResult]:
    """Drive each scenario step by step, keeping its context as the verifier's agent runner does.

    The system prompt and goal are always sent; when the engine refuses a prompt as longer than the model's
    context, the oldest turns are dropped and the step is re-sent (``verifier.kinds.agent.kind.send_step``, the
    runner's own function; the window learnt from the error is kept for later scenarios, as the runner keeps it
    per endpoint). Why: verifier-tiny was trained on documents of at most 1,024 tokens, cut the same way
    (system, goal, the latest calls), and sending it longer prompts measures positions it never saw, not the
    agent (training/JOURNAL.md, "eighth session").
    """
    learned_window: int | None = None  # the narrowest window learnt from a context error, for every scenario

    async def one(client: EndpointClient, sc: Any) -> AgentResult:
        nonlocal learned_window
        env = sc.make_env()
        tools = env.tools()
        conv = Conversation(sc, tools)
        request = {"tools": tools, "temperature": 0, "max_tokens": max_tokens}
        invalid = 0
        transcript: list[str] = []
        stop = "budget"
        steps = 0
        for step in range(1, sc.step_budget + 1):
            steps = step
            sent = await send_step(conv, client.chat, request, window=learned_window, max_tokens=max_tokens)
            ex = sent.exchange
            if sent.context_retries and sent.window is not None:
                learned_window = min(learned_window or sent.window, sent.window)
            if not ex.ok:
                if not is_context_error(ex):
                    raise RuntimeError(f"{base_url}: agent step of {sc.id} failed: {ex.error_message}")
                stop = "context_limit"  # even the latest turn alone does not fit: the trajectory ends here
                transcript.append("stop: context limit")
                break
            conv.calibrate(ex.usage.prompt_tokens, sent.sent_chars)
            if not ex.tool_calls:
                stop = "answered"
                transcript.append(f"final: {(ex.content or '')[:80]}")
                break
            call = ex.tool_calls[0]
            outcome = env.call(call.name or "", call.arguments or "")
            invalid += not outcome.valid
            transcript.append(f"{call.name}({call.arguments}) -> {outcome.result_text[:60]}")
            call_id = call.id or "call_0"
            conv.add_turn([{"role": "assistant", "content": ex.content, "tool_calls": [
                               {"id": call_id, "type": "function",
                                "function": {"name": call.name or "", "arguments": call.arguments}}]},
                           {"role": "tool", "tool_call_id": call_id, "content": outcome.result_text}])
        return AgentResult(sc.id, sc.horizon, env.check(), steps, invalid, stop, transcript, conv.dropped)

    # one attempt per request: a transport error here is a broken measurement, not something to retry past
    config = EndpointConfig(name="engine", base_url=base_url, model=MODEL_ID[base_url],
                            concurrency=max(1, len(scenarios)), timeout=600, max_attempts=1)
    async with EndpointClient(config) as client:
        return list(await asyncio.gather(*(one(client, s) for s in scenarios)))


def agent_metrics(results: list[AgentResult]) -> dict[str, Any]:
    by_h: dict[int, list[AgentResult]] = {}
    for r in results:
        by_h.setdefault(r.horizon, []).append(r)
    return {str(h): {"task_success": stats.wilson(sum(r.success for r in rs), len(rs)).model_dump(),
                     "invalid_steps": sum(r.invalid_steps for r in rs), "steps": sum(r.steps for r in rs)}
            for h, rs in sorted(by_h.items())}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, default=None, help="checkpoint folder (default: the shipped model)")
    ap.add_argument("--n", type=int, default=REPORTED_CASES, help="first N toolcall-core cases")
    ap.add_argument("--variants", default="bf16,fp8kv,int4,fp8kv+int4")
    ap.add_argument("--agent", action="store_true", help="also run agent scenarios")
    ap.add_argument("--agent-variants", default="bf16", help="variants that also run the agent scenarios")
    ap.add_argument("--agent-horizons", default="10,25")
    ap.add_argument("--agent-seeds", default=",".join(map(str, REPORTED_AGENT_SEEDS)),
                    help="seeds per env and horizon (suite uses seed 0)")
    ap.add_argument("--training-like", action="store_true",
                    help="score cases worded from the training templates instead (underfit or not general?)")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)

    if args.training_like:
        cases = training_like_cases(args.n)
    else:
        cases = load_jsonl(CORE_SUITE, name="toolcall-core").cases[: args.n]
    scenarios: list[Any] = []
    if args.agent:
        from suites.agent.scenarios import ENVIRONMENTS, scenario
        for h in (int(x) for x in args.agent_horizons.split(",")):
            for env in ENVIRONMENTS:
                for seed in (int(x) for x in args.agent_seeds.split(",")):
                    scenarios.append(scenario(env, h, seed))

    suite_name = "training-like (train templates, seed 4242)" if args.training_like else CORE_SUITE.name
    report: dict[str, Any] = {"model": str(args.model or "shipped"), "toolcall_suite": suite_name,
                              "n_cases": len(cases), "variants": {}}
    correct: dict[str, list[bool]] = {}
    for name in args.variants.split(","):
        t0 = time.time()
        with start_server(args.model, **VARIANTS[name]) as srv:
            MODEL_ID[srv.base_url] = srv.model
            results = asyncio.run(run_toolcall(srv.base_url, cases, args.concurrency))
            entry: dict[str, Any] = {"toolcall": toolcall_metrics(results),
                                     "outcomes": failure_breakdown(results, cases),
                                     # per case, so two checkpoints can be compared pair by pair
                                     "case_outcomes": {r.case_id: r.outcome for r in results}}
            correct[name] = [r.correct for r in results]
            if scenarios and name in args.agent_variants.split(","):
                ag = asyncio.run(run_agent(srv.base_url, scenarios))
                entry["agent"] = agent_metrics(ag)
                entry["agent_runs"] = [{"scenario": r.scenario, "success": r.success, "steps": r.steps,
                                        "invalid_steps": r.invalid_steps, "stop": r.stop,
                                        "trimmed_turns": r.trimmed_turns} for r in ag]
        entry["wall_s"] = round(time.time() - t0, 1)
        if name != "bf16" and "bf16" in correct:
            entry["case_accuracy_diff_vs_bf16"] = stats.newcombe_paired_diff(correct["bf16"],
                                                                             correct[name]).model_dump()
            entry["mcnemar_p_vs_bf16"] = stats.mcnemar(correct["bf16"], correct[name])
        report["variants"][name] = entry
        tc = entry["toolcall"]
        print(f"{name}: F1 {tc['trigger_f1']['value']} schema {tc['schema_accuracy']['value']} "
              f"name {tc['tool_name_accuracy']['value']} args {tc['args_bfcl_accuracy']['value']} "
              f"case {tc['case_accuracy']['value']} ({entry['wall_s']}s)", flush=True)
        print(f"  outcomes: {json.dumps(entry['outcomes'])}", flush=True)
        if "agent" in entry:
            print(f"  agent: {json.dumps({h: v['task_success'] for h, v in entry['agent'].items()})}", flush=True)
        if args.out:  # after every variant, so a slow run still leaves what it measured
            args.out.write_text(json.dumps(report, indent=2) + "\n")
    if not args.out:
        print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
