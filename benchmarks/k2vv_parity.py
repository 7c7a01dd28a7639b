"""Do our K2VV counts equal K2VV's rule on the same records? (issue #31 §2)

    python benchmarks/k2vv_parity.py                       # builds a 212-line K2VV-format file, runs builtin:tiny
    python benchmarks/k2vv_parity.py --file samples.jsonl --reference ref=https://host/v1 --model M

1. Builds a K2VV-format file (or takes ``--file``): request bodies only, no ``_meta``, from the built-in catalogue
   suites (``toolcall-core``: tool or no tool; ``toolcall-schemas``: forced calls) with K2VV's habits mixed in
   (``_input`` system role, ``"stream": true`` on every other line, a ``model`` key), plus edge lines whose tools
   K2VV treats specially: empty ``parameters``, no ``parameters``, a schema failing its metaschema, a draft-04
   schema, ``tool_choice: "required"``. Every line keeps ``temperature: 0``.
2. Runs it with ``verifier run`` against one endpoint (the built-in engine by default).
3. Recomputes K2VV's rule from ``records.jsonl`` and the file INDEPENDENTLY of ``verifier``'s scoring code: the
   small function :func:`k2vv_verdict` below, written from K2VV's published description (README "ToolCall-Schema
   Accuracy" and its validator: finish_reason == "tool_calls"; at least one call; each call names an offered tool
   with a truthy ``parameters``, its arguments ``json.loads`` and pass ``jsonschema.validate``).
4. Prints our counts beside the independent ones and the per-record agreement; exits 1 unless identical.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import jsonschema

ROOT = Path(__file__).resolve().parents[1]
CATALOGUE = ROOT / "suites" / "toolcall" / "data"

# ------------------------------------------------------------------------------------------ the input file

_WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Current weather for a city.",
                                             "parameters": {"type": "object",
                                                            "properties": {"city": {"type": "string"}},
                                                            "required": ["city"]}}}


def _edge_tool(name: str, params: Any = "absent") -> dict:
    fn: dict[str, Any] = {"name": name, "description": f"{name.replace('_', ' ')}."}
    if params != "absent":
        fn["parameters"] = params
    return {"type": "function", "function": fn}


EDGE_TOOLS = [
    ("empty parameters", _edge_tool("get_weather", {})),
    ("no parameters", _edge_tool("get_weather")),
    ("schema failing its metaschema", _edge_tool("get_weather", {"type": "object",
                                                                 "properties": {"city": {"type": "strng"}}})),
    ("draft-04 schema", _edge_tool("get_weather", {"$schema": "http://json-schema.org/draft-04/schema#",
                                                   "type": "object", "properties": {"city": {"type": "string"}},
                                                   "required": ["city"]})),
]
EDGE_PROMPTS = ["What is the weather in Oslo right now?", "Weather in Lima please.", "Is it raining in Quito?"]


def build_file(path: Path, n_core: int, n_schemas: int) -> dict[str, int]:
    """Write the K2VV-format file; returns how many lines came from where."""
    def take(name: str, n: int) -> list[dict]:
        with (CATALOGUE / f"{name}.jsonl").open(encoding="utf-8") as fh:
            return [json.loads(line) for _, line in zip(range(n), fh)]

    bodies: list[dict] = []
    for body in take("toolcall-core", n_core) + take("toolcall-schemas", n_schemas):
        body.pop("_meta", None)
        bodies.append(body)
    n_catalogue = len(bodies)
    for _label, tool in EDGE_TOOLS:
        for j, prompt in enumerate(EDGE_PROMPTS):
            body: dict[str, Any] = {"messages": [{"role": "user", "content": prompt}], "tools": [tool],
                                    "temperature": 0, "max_tokens": 128}
            if j == 2:
                body["tool_choice"] = "required"
            bodies.append(body)
    for i, body in enumerate(bodies):
        msgs = body["messages"]
        if i % 3 == 0 and msgs and msgs[0].get("role") == "system":
            msgs[0]["role"] = "_input"  # K2VV's name for the system role
        if i % 2 == 1:
            body["stream"] = True
        if i % 5 == 0:
            body = {"model": "kimi-k2-0905-preview", **body}  # K2VV lines may name a model; the run replaces it
        bodies[i] = body
    path.write_text("".join(json.dumps(b, ensure_ascii=False) + "\n" for b in bodies), encoding="utf-8")
    return {"catalogue": n_catalogue, "edge": len(bodies) - n_catalogue, "total": len(bodies)}


# ------------------------------------------------------------------ K2VV's rule, independently of verifier


def k2vv_call_ok(call: dict, tools: list) -> bool:
    """One call by K2VV's published rule; any error on the way makes it invalid."""
    try:
        name = call["function"]["name"]
        params = next((t["function"]["parameters"] for t in tools if t["function"]["name"] == name), None)
        if not params:
            return False
        args = call["function"]["arguments"]
        if isinstance(args, str):
            args = json.loads(args)
        jsonschema.validate(instance=args, schema=params)
        return True
    except Exception:  # noqa: BLE001 - the rule: whatever goes wrong, the call is not valid
        return False


def k2vv_verdict(record: dict, line: dict) -> tuple[bool, str | None, bool | None]:
    """(success, finish_reason, tool_calls_valid) of one exchange, read from its stored response as K2VV would."""
    choices = (record.get("response") or {}).get("choices") or []
    choice = choices[0] if choices and isinstance(choices[0], dict) else {}
    # K2VV's SDK builds its response objects without validating them: any 2xx body with choices is a success,
    # also one that our client classifies as a malformed provider reply
    ok_status = record.get("status") is not None and 200 <= record["status"] < 300
    success = ok_status and (record.get("error_class") is None
                             or (record.get("error_class") == "malformed_response" and bool(choice)))
    if not success:
        return False, None, None
    finish = choice.get("finish_reason")
    if finish is None and record.get("stream"):
        finish = "stop"  # K2VV's stream reassembly reports "stop" when no finish reason came
    valid = None
    if finish == "tool_calls":
        message = choice.get("message") or {}
        if "tool_calls" in message:  # the body as sent (kept when our extraction had to change something)
            calls = message["tool_calls"] or []
        else:  # stored once: the record's own fields hold the calls exactly as they arrived
            calls = [{"function": {"name": c["name"], "arguments": c["arguments"]}} for c in record["tool_calls"]]
        valid = bool(calls) and all(k2vv_call_ok(c, line.get("tools", [])) for c in calls)
    return True, finish, valid


def k2vv_summary(records: list[dict], lines: list[dict]) -> tuple[dict[str, Any], dict[tuple, bool | None]]:
    s: dict[str, Any] = {"success_count": 0, "failure_count": 0, "finish_stop": 0, "finish_tool_calls": 0,
                         "finish_others": 0, "finish_others_detail": {}, "schema_validation_error_count": 0,
                         "successful_tool_call_count": 0}
    per: dict[tuple, bool | None] = {}
    others: Counter[str] = Counter()
    for r in records:
        line_no = int(re.match(r"L(\d+)-", r["case_id"]).group(1))  # ids of lines without _meta: L<line>-<hash>
        ok, finish, valid = k2vv_verdict(r, lines[line_no - 1])
        s["success_count" if ok else "failure_count"] += 1
        per[(r["case_id"], r.get("variant"), r.get("repeat", 0))] = valid if finish == "tool_calls" else None
        if finish == "stop":
            s["finish_stop"] += 1
        elif finish == "tool_calls":
            s["finish_tool_calls"] += 1
            s["successful_tool_call_count" if valid else "schema_validation_error_count"] += 1
        elif finish:
            s["finish_others"] += 1
            others[finish] += 1
    s["finish_others_detail"] = dict(sorted(others.items()))
    return s, per


# ----------------------------------------------------------------------------------------------- the run


def run_verifier(file: Path, out: Path, reference: str, model: str | None) -> float:
    cmd = [sys.executable, "-m", "verifier.cli", "run", "--reference", reference, "--suite", str(file),
           "--out", str(out), "--no-history", "--quiet"]
    if model:
        cmd += ["--model", model]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def ours_per_record(records_path: Path, suite_path: Path) -> dict[tuple, bool | None]:
    """Our own code path's per-record verdicts (verifier.kinds.toolcall.k2vv_rule), to compare record by record."""
    sys.path.insert(0, str(ROOT))
    from verifier.kinds.toolcall import k2vv_rule
    from verifier.kinds.toolcall.suite_format import load_jsonl
    from verifier.records import ExchangeRecord

    cases = {c.id: c for c in load_jsonl(suite_path).cases}
    out: dict[tuple, bool | None] = {}
    for text in records_path.read_text(encoding="utf-8").splitlines():
        r = ExchangeRecord.model_validate_json(text)
        tools = cases[r.case_id].body.get("tools", []) if r.case_id in cases else []
        out[(r.case_id, r.variant, r.repeat)] = (k2vv_rule.record_valid(r, tools)
                                                 if k2vv_rule.finish_reason(r) == "tool_calls" else None)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--file", type=Path, help="an existing K2VV-format file (default: build one)")
    ap.add_argument("--core", type=int, default=150, help="lines taken from toolcall-core (default 150)")
    ap.add_argument("--schemas", type=int, default=50, help="lines taken from toolcall-schemas (default 50)")
    ap.add_argument("--reference", default="ref=builtin:tiny", help="endpoint to run against (default builtin:tiny)")
    ap.add_argument("--model", help="model id for a URL endpoint")
    ap.add_argument("--out", type=Path, help="run folder to keep (default: a temporary one)")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp) / "run"
        if args.file:
            file, made = args.file, None
        else:
            file = (args.out.parent if args.out else Path(tmp)) / "k2vv_parity.jsonl"
            file.parent.mkdir(parents=True, exist_ok=True)
            made = build_file(file, args.core, args.schemas)
        lines = [json.loads(x) for x in file.read_text(encoding="utf-8").splitlines() if x.strip()]
        wall = run_verifier(file, out, args.reference, args.model)
        summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
        records = [json.loads(x) for x in (out / "records.jsonl").read_text(encoding="utf-8").splitlines()]
        (res,) = [r for r in summary["results"] if r["is_reference"]]
        theirs, per_theirs = k2vv_summary(records, lines)
        per_ours = ours_per_record(out / "records.jsonl", file)

    src = (f"{made['total']} lines ({made['catalogue']} from the catalogue suites, {made['edge']} edge lines)"
           if made else f"{len(lines)} lines")
    print(f"K2VV-format file: {file.name}, {src}; endpoint {args.reference}; {len(records)} exchanges in {wall:.0f} s")
    problems = summary.get("input_problems", [])
    print(f"input problems: {sum(p.get('action') == 'sent' for p in problems)} sent anyway, "
          f"{sum(p.get('action', 'skipped') == 'skipped' for p in problems)} skipped")
    ours = res["extra"]["k2vv_summary"]
    rows = [("count_finish_reason_tool_calls", res["counts"]["count_finish_reason_tool_calls"],
             theirs["finish_tool_calls"]),
            ("count_successful_tool_call", res["counts"]["count_successful_tool_call"],
             theirs["successful_tool_call_count"])]
    rows += [(k, ours[k], theirs[k]) for k in theirs]
    print(f"{'field':34s} {'verifier':>10s} {'K2VV rule':>10s}")
    for k, a, b in rows:
        print(f"{k:34s} {a!s:>10s} {b!s:>10s}{'' if a == b else '   <-- differs'}")
    acc = res["metrics"]["k2vv_schema_accuracy"]
    indep = theirs["successful_tool_call_count"] / theirs["finish_tool_calls"] if theirs["finish_tool_calls"] else None
    def f(x: float | None) -> str:
        return "-" if x is None else f"{x:.4f}"
    print(f"{'k2vv_schema_accuracy':34s} {f(acc['value']):>10s} {f(indep):>10s}   (ours: 95% CI {f(acc['low'])} to "
          f"{f(acc['high'])}, n={acc['n']})")
    sa = res["metrics"].get("schema_accuracy", {})
    fc = res["metrics"].get("forced_call_success", {})
    print(f"for contrast, our own: schema_accuracy {f(sa.get('value'))} (n={sa.get('n')} calls), "
          f"forced_call_success {f(fc.get('value'))} (n={fc.get('n')} forced replies)")
    keys = sorted(set(per_theirs) | set(per_ours), key=str)
    agree = sum(per_theirs.get(k, "missing") == per_ours.get(k, "missing") for k in keys)
    print(f"per-record verdict agreement: {agree}/{len(keys)}")
    identical = all(a == b for _, a, b in rows) and agree == len(keys) and acc["value"] == indep
    print("identical" if identical else "NOT identical")
    return 0 if identical else 1


if __name__ == "__main__":
    raise SystemExit(main())
