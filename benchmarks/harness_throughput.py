"""Harness throughput: tool-call requests against a fast loopback server, verifier client vs the openai SDK.

    python benchmarks/harness_throughput.py [--requests 4000] [--concurrency 64] [--runs 3]

The server (``verifier.testing.scripted_server``, answering every request with a tool call) runs in its own
process, and each client measurement runs in a fresh child process, so "client CPU" is exactly the client
side: user+sys CPU of that process over the timed loop (imports and warm-up excluded). Modes:

* ``verifier``: ``EndpointClient.chat`` for every request, each result turned into an ExchangeRecord and
  appended to a RecordStore (what ``verifier run`` does per exchange);
* ``openai-sdk``: a plain asyncio loop over ``AsyncOpenAI.chat.completions.create`` with a semaphore of the
  same size (no records written: the baseline gets the benefit of the doubt).

Prints one line per run and the medians; ``--json`` writes them to a file.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Current weather for a city.",
                                           "parameters": {"type": "object", "properties": {
                                               "city": {"type": "string"},
                                               "unit": {"type": "string", "enum": ["c", "f"]}},
                                               "required": ["city", "unit"]}}},
         {"type": "function", "function": {"name": "search_flights", "parameters": {"type": "object", "properties": {
             "origin": {"type": "string", "pattern": "^[A-Z]{3}$"}, "destination": {"type": "string"},
             "passengers": {"type": "integer", "minimum": 1, "maximum": 9}}, "required": ["origin", "destination"]}}}]


def bodies(n: int) -> list[dict]:
    return [{"messages": [{"role": "system", "content": "Use tools when they fit."},
                          {"role": "user", "content": f"What is the weather in city number {i}?"}],
             "tools": TOOLS, "tool_choice": "required", "temperature": 0} for i in range(n)]


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _sys() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_stime


async def _verifier(url: str, n: int, conc: int) -> tuple[float, float, int]:
    from verifier.client import EndpointClient
    from verifier.records import EndpointConfig, ExchangeRecord
    from verifier.store import RecordStore

    cfg = EndpointConfig(name="bench", base_url=url, model="scripted-model", concurrency=conc, max_attempts=3)
    reqs = bodies(n)
    with tempfile.TemporaryDirectory() as tmp:
        store = RecordStore(Path(tmp) / "records.jsonl")
        async with EndpointClient(cfg) as c:
            await asyncio.gather(*(c.chat(b) for b in reqs[:conc]))  # warm-up: open the keep-alive connections
            ok = 0

            async def one(i: int, b: dict) -> None:
                nonlocal ok
                ex = await c.chat(b)
                ok += ex.ok
                store.append(ExchangeRecord.model_construct(**ex.__dict__, kind="toolcall", suite="bench",
                                                            case_id=str(i), repeat=0, endpoint="bench", step=None,
                                                            variant=None, extra={}, timestamp=time.time()))

            t0, c0, s0 = time.perf_counter(), _cpu(), _sys()
            await asyncio.gather(*(one(i, b) for i, b in enumerate(reqs)))
            wall, cpu, sys_s = time.perf_counter() - t0, _cpu() - c0, _sys() - s0
        store.close()
    return wall, cpu, sys_s, ok


async def _sdk(url: str, n: int, conc: int) -> tuple[float, float, int]:
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=url, api_key="bench", max_retries=2)
    sem = asyncio.Semaphore(conc)
    reqs = bodies(n)
    ok = 0

    async def one(b: dict) -> None:
        nonlocal ok
        async with sem:
            r = await client.chat.completions.create(model="scripted-model", **b)
            ok += bool(r.choices)

    await asyncio.gather(*(one(b) for b in reqs[:conc]))
    ok = 0
    t0, c0, s0 = time.perf_counter(), _cpu(), _sys()
    await asyncio.gather(*(one(b) for b in reqs))
    wall, cpu, sys_s = time.perf_counter() - t0, _cpu() - c0, _sys() - s0
    await client.close()
    return wall, cpu, sys_s, ok


def child(mode: str, url: str, n: int, conc: int) -> None:
    fn = _verifier if mode == "verifier" else _sdk
    wall, cpu, sys_s, ok = asyncio.run(fn(url, n, conc))
    print(json.dumps({"mode": mode, "wall_s": wall, "cpu_s": cpu, "sys_s": sys_s, "ok": ok, "n": n}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=4000)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--modes", default="verifier,openai-sdk")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--child", nargs=2, metavar=("MODE", "URL"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child[0], args.child[1], args.requests, args.concurrency)
        return
    server = subprocess.Popen([sys.executable, "-c", "from verifier.testing.scripted_server import main; main()"],
                              stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        port = int(server.stdout.readline().split()[1])
        url = f"http://127.0.0.1:{port}/v1"
        results: dict[str, list[dict]] = {m: [] for m in args.modes.split(",")}
        for run in range(args.runs):
            for mode in results:
                out = subprocess.run([sys.executable, __file__, "--child", mode, url, "--requests", str(args.requests),
                                      "--concurrency", str(args.concurrency)], capture_output=True, text=True, cwd=ROOT)
                if out.returncode != 0:
                    raise SystemExit(f"{mode} run failed: {out.stderr.strip().splitlines()[-1:]}")
                r = json.loads(out.stdout.strip().splitlines()[-1])
                r["req_per_s"] = r["n"] / r["wall_s"]
                r["cpu_ms_per_req"] = 1000 * r["cpu_s"] / r["n"]
                r["sys_ms_per_req"] = 1000 * r["sys_s"] / r["n"]
                results[mode].append(r)
                print(f"run {run + 1} {mode:10s} wall {r['wall_s']:.2f} s  {r['req_per_s']:.0f} req/s  "
                      f"client CPU {r['cpu_ms_per_req']:.3f} ms/req (kernel {r['sys_ms_per_req']:.3f})  ok {r['ok']}/{r['n']}", flush=True)
        med = {m: {k: statistics.median(r[k] for r in rs) for k in ("wall_s", "req_per_s", "cpu_ms_per_req", "sys_ms_per_req")}
               for m, rs in results.items()}
        print(f"\nmedian of {args.runs}: {args.requests} requests, concurrency {args.concurrency}")
        for m, v in med.items():
            print(f"  {m:10s} wall {v['wall_s']:.2f} s  {v['req_per_s']:.0f} req/s  client CPU {v['cpu_ms_per_req']:.3f} ms/req "
                  f"(of which kernel {v['sys_ms_per_req']:.3f})")
        if "verifier" in med and "openai-sdk" in med:
            print(f"  throughput ratio verifier/openai-sdk: {med['verifier']['req_per_s'] / med['openai-sdk']['req_per_s']:.2f}x")
        if args.json:
            args.json.write_text(json.dumps({"runs": results, "median": med}, indent=2))
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    main()
