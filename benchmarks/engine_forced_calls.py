"""Forced tool calls (`tool_choice` naming a function, or "required") served by the reference engine with the
shipped model: how many replies are a valid call of the forced tool, streamed and not.

    python benchmarks/engine_forced_calls.py --n 60 [--required] [--out FILE]

Why: constrained decoding changes what the shipped model produces for forced cases (the default run's
toolcall-schemas suite is all forced calls), so a change to decoding is reported with these figures before and
after. Counts per outcome: `valid` (a call of the forced tool whose arguments parse and pass the tool's schema),
`invalid_args` (a call of the right tool, arguments not valid), `wrong_tool`, `no_call` (no call: markup left in
content, or plain text), `error` (HTTP error).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections import Counter
from pathlib import Path

import httpx
import jsonschema

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "suites" / "toolcall" / "data" / "toolcall-schemas.jsonl"


def load_cases(n: int, required: bool) -> list[dict]:
    cases = []
    with SUITE.open() as f:
        for line in f:
            body = json.loads(line)
            body.pop("_meta", None)
            if required:                   # the named tool stays the expected one; the model picks among all
                body["_expected"] = body["tool_choice"]["function"]["name"]
                body["tool_choice"] = "required"
            cases.append(body)
            if len(cases) == n:
                break
    return cases


def forced_name(body: dict) -> str:
    tc = body["tool_choice"]
    return tc["function"]["name"] if isinstance(tc, dict) else body["_expected"]


def reply_calls(resp: dict) -> tuple[list[dict], str | None]:
    msg = resp["choices"][0]["message"]
    return msg.get("tool_calls") or [], msg.get("content")


def stream_calls(lines: list[str]) -> tuple[list[dict], str | None]:
    """Reassemble streamed deltas (arguments come in several pieces)."""
    calls: dict[int, dict] = {}
    content = ""
    for line in lines:
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        obj = json.loads(line[6:])
        for ch in obj.get("choices") or []:
            d = ch.get("delta") or {}
            content += d.get("content") or ""
            for tc in d.get("tool_calls") or []:
                c = calls.setdefault(tc["index"], {"function": {"name": "", "arguments": ""}})
                fn = tc.get("function") or {}
                c["function"]["name"] += fn.get("name") or ""
                c["function"]["arguments"] += fn.get("arguments") or ""
    return [calls[i] for i in sorted(calls)], content or None


def outcome(body: dict, calls: list[dict]) -> str:
    if not calls:
        return "no_call"
    fn = calls[0]["function"]
    name = forced_name(body)
    if fn["name"] != name:
        return "wrong_tool"
    schema = next(t["function"].get("parameters") or {} for t in body["tools"] if t["function"]["name"] == name)
    try:
        jsonschema.validate(json.loads(fn["arguments"]), schema)
    except (json.JSONDecodeError, jsonschema.ValidationError, jsonschema.SchemaError):
        return "invalid_args"
    return "valid"


async def run(base_url: str, model: str, cases: list[dict], stream: bool) -> Counter:
    out: Counter = Counter()
    sem = asyncio.Semaphore(8)
    async with httpx.AsyncClient(timeout=300) as http:
        async def one(body: dict) -> None:
            req = {**{k: v for k, v in body.items() if k != "_expected"}, "model": model, "temperature": 0,
                   "max_tokens": 256, "stream": stream}
            async with sem:
                try:
                    if stream:
                        async with http.stream("POST", f"{base_url}/chat/completions", json=req) as r:
                            r.raise_for_status()
                            calls, _ = stream_calls([ln async for ln in r.aiter_lines()])
                    else:
                        r = await http.post(f"{base_url}/chat/completions", json=req)
                        r.raise_for_status()
                        calls, _ = reply_calls(r.json())
                except httpx.HTTPError:
                    out["error"] += 1
                    return
            out[outcome(body, calls)] += 1

        await asyncio.gather(*(one(b) for b in cases))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=60, help="first N cases of toolcall-schemas")
    ap.add_argument("--required", action="store_true",
                    help="tool_choice 'required' (all tools offered; the named one is expected) instead of the name")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    from reference_engine.launch import start_server

    cases = load_cases(args.n, args.required)
    report = {"n": len(cases), "tool_choice": "required" if args.required else "named", "variants": {}}
    with start_server() as srv:
        for stream in (False, True):
            t0 = time.perf_counter()
            counts = asyncio.run(run(srv.base_url, srv.model, cases, stream))
            name = "stream" if stream else "nonstream"
            report["variants"][name] = {"counts": dict(sorted(counts.items())), "valid": counts["valid"],
                                        "of": len(cases), "seconds": round(time.perf_counter() - t0, 2)}
            print(f"{name}: {counts['valid']}/{len(cases)} valid  {dict(sorted(counts.items()))}", flush=True)
    if args.out:
        args.out.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
