"""Do our K2VV counts equal K2VV's rule on the same records? (issue #31 §2)

    python benchmarks/k2vv_parity.py                       # builds a 215-line K2VV-format file, runs builtin:tiny
    python benchmarks/k2vv_parity.py --file samples.jsonl --reference ref=https://host/v1 --model M

1. Builds a K2VV-format file (or takes ``--file``): request bodies only, no ``_meta``, from the built-in catalogue
   suites (``toolcall-core``: tool or no tool; ``toolcall-schemas``: forced calls) with K2VV's habits mixed in
   (``_input`` system role, ``"stream": true`` on every other line, a ``model`` key), plus edge lines whose tools
   K2VV treats specially: empty ``parameters``, no ``parameters``, a schema failing its metaschema, a draft-04
   schema, a tool name offered twice, ``tool_choice: "required"``. Every line keeps ``temperature: 0``.
2. Runs it with ``verifier run`` against one endpoint (the built-in engine by default).
3. Recomputes K2VV's rule from ``records.jsonl`` and the file INDEPENDENTLY of ``verifier``'s scoring code: the
   small function :func:`k2vv_verdict` below, written from K2VV's published description (README "ToolCall-Schema
   Accuracy" and its validator: finish_reason == "tool_calls"; at least one call; each call names an offered tool
   with a truthy ``parameters``, its arguments ``json.loads`` and pass ``jsonschema.validate``).
4. Prints our counts beside the independent ones, the per-record agreement, and the per-LINE agreement against what
   was planned (every JSON-object line of the file, which K2VV sends): a line ``verifier`` did not send cannot show up
   in the records, so it is counted here as a disagreement; exits 1 unless identical.
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
    ("empty parameters", [_edge_tool("get_weather", {})]),
    ("no parameters", [_edge_tool("get_weather")]),
    ("schema failing its metaschema", [_edge_tool("get_weather", {"type": "object",
                                                                  "properties": {"city": {"type": "strng"}}})]),
    ("draft-04 schema", [_edge_tool("get_weather", {"$schema": "http://json-schema.org/draft-04/schema#",
                                                    "type": "object", "properties": {"city": {"type": "string"}},
                                                    "required": ["city"]})]),
    # K2VV sends these and validates against the FIRST tool of the name (here: city must be an integer)
    ("a name offered twice", [_edge_tool("get_weather", {"type": "object", "properties": {"city": {"type": "integer"}},
                                                         "required": ["city"]}), _WEATHER]),
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
    for _label, tools in EDGE_TOOLS:
        for j, prompt in enumerate(EDGE_PROMPTS):
            edge: dict[str, Any] = {"messages": [{"role": "user", "content": prompt}], "tools": list(tools),
                                    "temperature": 0, "max_tokens": 128}
            if j == 2:
                edge["tool_choice"] = "required"
            bodies.append(edge)
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


DROPPED = "dropped"  # K2VV's judging raised (AttributeError): its loop leaves the line out of every count


def k2vv_verdict(record: dict, line: dict) -> tuple[bool, str | None, bool | None] | str:
    """(success, finish_reason, tool_calls_valid) of one exchange, read from its stored response as K2VV would,
    or :data:`DROPPED`."""
    response = record.get("response")
    choices = response.get("choices") if isinstance(response, dict) else None
    # K2VV's SDK builds its response objects without validating them: any 2xx JSON object is a success, also one that
    # our client classifies as a malformed provider reply (no choices, a null message, a non-object choice)
    ok_status = record.get("status") is not None and 200 <= record["status"] < 300
    success = ok_status and (record.get("error_class") is None
                             or (record.get("error_class") == "malformed_response" and isinstance(response, dict)))
    if not success:
        return False, None, None
    if not choices:  # `if response and "choices" in response and response["choices"]` is false: no finish reason
        return True, None, None
    choice = choices[0]
    if not isinstance(choice, dict):
        return DROPPED  # choice.get(...) raises
    finish = choice.get("finish_reason")
    if finish is None and record.get("stream"):
        finish = "stop"  # K2VV's stream reassembly reports "stop" when no finish reason came
    valid = None
    if finish == "tool_calls":
        if "message" in choice and not isinstance(choice["message"], dict):
            return DROPPED  # choice.get("message", {}).get(...) on null raises
        message = choice.get("message", {})
        if "tool_calls" in message and not record.get("stream"):  # the body as sent (kept when our extraction
            calls = message["tool_calls"] or []                     # had to change something)
        else:  # the record's own fields hold the calls as they arrived; K2VV keeps a split name's last piece
            calls = [{"function": {"name": c.get("name_last_delta") or c["name"], "arguments": c["arguments"]}}
                     for c in record["tool_calls"]]
        valid = bool(calls) and all(k2vv_call_ok(c, line.get("tools", [])) for c in calls)
    return True, finish, valid


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text) if text.strip() else None
    except ValueError:
        return None  # K2VV logs and skips a line that is not JSON; so does verifier (listed as skipped)


def planned_lines(lines: list[Any]) -> dict[int, str]:
    """What K2VV sends: every line that is a JSON object, by line number -> the case id ``verifier`` gives it
    (``_meta.id``, else ``L<line>-<hash>``, matched by its prefix)."""
    out: dict[int, str] = {}
    for n, obj in enumerate(lines, 1):
        if isinstance(obj, dict):
            meta = obj.get("_meta")
            out[n] = str(meta["id"]) if isinstance(meta, dict) and "id" in meta else f"L{n}-"
    return out


def line_of(case_id: str, planned: dict[int, str]) -> int | None:
    m = re.match(r"L(\d+)-", case_id)
    if m and planned.get(int(m.group(1))) == f"L{m.group(1)}-":
        return int(m.group(1))
    return next((n for n, cid in planned.items() if cid == case_id), None)


def k2vv_summary(records: list[dict], lines: list[Any]) -> tuple[dict[str, Any], dict[tuple, Any]]:
    """K2VV's summary from the records, and each record's verdict keyed (line, variant, repeat)."""
    s: dict[str, Any] = {"success_count": 0, "failure_count": 0, "finish_stop": 0, "finish_tool_calls": 0,
                         "finish_others": 0, "finish_others_detail": {}, "schema_validation_error_count": 0,
                         "successful_tool_call_count": 0}
    per: dict[tuple, Any] = {}
    others: Counter[str] = Counter()
    planned = planned_lines(lines)
    for r in records:
        line_no = line_of(r["case_id"], planned)
        verdict = k2vv_verdict(r, lines[line_no - 1] if line_no else {})
        key = (line_no, r.get("variant"), r.get("repeat", 0))
        if isinstance(verdict, str):  # DROPPED
            per[key] = verdict
            continue
        ok, finish, valid = verdict
        s["success_count" if ok else "failure_count"] += 1
        per[key] = valid if finish == "tool_calls" else finish
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


def per_line_agreement(planned: dict[int, str], theirs: dict[tuple, Any], ours: dict[tuple, Any]) -> dict[str, Any]:
    """Per planned line (what K2VV would send), not per recorded exchange: a line ``verifier`` never sent (skipped as
    bad input) is a disagreement, which a comparison over records alone cannot see."""
    recorded: dict[int, list[tuple]] = {}
    for key in set(theirs) | set(ours):
        recorded.setdefault(key[0], []).append(key)
    not_sent = sorted(n for n in planned if n not in recorded)
    differ = sorted(n for n, keys in recorded.items()
                    if n in planned and any(theirs.get(k, "missing") != ours.get(k, "missing") for k in keys))
    unplanned = sorted(n for n in recorded if n not in planned)  # records no input line explains
    agree = len(planned) - len(not_sent) - len(differ)
    return {"planned": len(planned), "agree": agree, "not_sent": not_sent, "differ": differ, "unplanned": unplanned}


# ----------------------------------------------------------------------------------------------- the run


def run_verifier(file: Path, out: Path, reference: str, model: str | None) -> float:
    cmd = [sys.executable, "-m", "verifier.cli", "run", "--reference", reference, "--suite", str(file),
           "--out", str(out), "--no-history", "--quiet"]
    if model:
        cmd += ["--model", model]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def ours_per_record(records_path: Path, suite_path: Path) -> dict[tuple, Any]:
    """Our own code path's per-record verdicts (verifier.kinds.toolcall.k2vv_rule), to compare record by record."""
    sys.path.insert(0, str(ROOT))
    from verifier.kinds.toolcall import k2vv_rule
    from verifier.kinds.toolcall.suite_format import load_jsonl
    from verifier.records import ExchangeRecord

    cases = {c.id: c for c in load_jsonl(suite_path).cases}
    out: dict[tuple, Any] = {}
    for text in records_path.read_text(encoding="utf-8").splitlines():
        r = ExchangeRecord.model_validate_json(text)
        case = cases.get(r.case_id)
        tools = case.body.get("tools", []) if case else []
        fr = k2vv_rule.finish_reason(r)
        key = (case.line if case else None, r.variant, r.repeat)
        out[key] = (DROPPED if k2vv_rule.dropped(r) else k2vv_rule.record_valid(r, tools) if fr == "tool_calls"
                    else fr)
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
        lines = [_json_or_none(x) for x in file.read_text(encoding="utf-8").splitlines()]  # by physical line
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
    print(f"per-record verdict agreement: {agree}/{len(keys)} recorded exchanges")
    per_line = per_line_agreement(planned_lines(lines), per_theirs, per_ours)
    print(f"per-line agreement: {per_line['agree']}/{per_line['planned']} planned lines (the JSON-object lines K2VV "
          f"sends); not sent by verifier: {len(per_line['not_sent'])} {per_line['not_sent'][:20]}; verdicts differ: "
          f"{len(per_line['differ'])} {per_line['differ'][:20]}")
    identical = (all(a == b for _, a, b in rows) and agree == len(keys) and acc["value"] == indep
                 and per_line["agree"] == per_line["planned"] and not per_line["unplanned"])
    print("identical" if identical else "NOT identical")
    return 0 if identical else 1


if __name__ == "__main__":
    raise SystemExit(main())
