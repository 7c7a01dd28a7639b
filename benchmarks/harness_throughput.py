"""Harness throughput against one fast loopback server: whole runs, and the client alone.

    python benchmarks/harness_throughput.py [--requests 2000] [--concurrency 64] [--runs 3]

The server (``verifier.testing.scripted_server``, answering every request with a valid tool call) runs in its
own process. Modes (``--modes``, comma-separated):

* ``verifier-run`` (default): a whole ``verifier run --reference URL --suite FILE --concurrency N`` in a fresh
  process, timed from start to exit: suite loading, preflight, every exchange written to records.jsonl,
  scoring, summary and report. The suite file holds ``--requests`` tool-call lines.
* ``k2vv-style`` (default): the same file through a client built the way K2-Vendor-Verifier builds its own
  (``openai.AsyncOpenAI`` with retries, an asyncio semaphore, ``model_dump`` of every response appended to a
  results file as it completes, ``jsonschema.validate`` of every call's arguments, running stats logged per
  result, a de-duplicating rewrite and a summary file at the end; see ``_k2vv_style``), also a fresh
  process timed start to exit. Issue #32's goal: ``verifier-run`` wall time at most 1/3 of this.
* ``k2vv-style+imports``: the same, plus the imports K2VV's module makes at start whether used or not
  (``transformers.AutoTokenizer``, ``tqdm``): closer to K2VV's real start-up cost.
* ``k2vv``: K2-Vendor-Verifier's own client, a copy of its ``tool_calls_eval.py`` that you supply with
  ``--k2vv-script PATH`` (it needs ``openai``, ``jsonschema``, ``megfile``, ``loguru``, ``tqdm``; the project does
  not ship or depend on it), run as K2VV's README runs it, with ``--concurrency`` the same as ours. This is the
  baseline issue #32 names; ``k2vv-style`` stands in for it where no copy is at hand.
* ``verifier``: ``EndpointClient.chat`` alone for every request, each result appended to a RecordStore, timed
  over the loop only (imports and warm-up excluded), with the client's CPU per request;
* ``openai-sdk``: a bare asyncio loop over ``AsyncOpenAI.chat.completions.create`` (no records written).

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


def write_suite(path: Path, n: int) -> None:
    """A K2VV-format file: request bodies only (no ``_meta``: K2VV's client passes every key to the SDK)."""
    with path.open("w") as fh:
        for b in bodies(n):
            fh.write(json.dumps(b) + "\n")


async def _k2vv_style(url: str, suite: Path, out: Path, conc: int) -> int:
    """A client built the way K2-Vendor-Verifier's ``tool_calls_eval`` is (our own code, from reading its design).

    Per request, as K2VV does: the prepared request's md5 over sorted JSON, ``AsyncOpenAI`` (timeout 600,
    3 retries) under a semaphore, ``model_dump()`` of the response, ``jsonschema.validate`` of each call. Per
    result, in ``asyncio.as_completed`` order: the result appended to results.jsonl (file opened per result),
    the running summary recomputed over all results so far and logged as one stats line on stderr. At the
    end: results re-read, de-duplicated by index, sorted, rewritten; summary.json written. Left out in the
    baseline's favour: the progress bar and K2VV's module-level ``transformers``/``megfile``/``loguru`` imports.
    """
    import hashlib

    import jsonschema
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=url, api_key="bench", timeout=600, max_retries=3)
    sem = asyncio.Semaphore(conc)
    out.mkdir(parents=True, exist_ok=True)
    results_file = out / "results.jsonl"
    results_file.write_text("")
    prepared = []
    for i, line in enumerate(x for x in suite.read_text().splitlines() if x.strip()):
        req = {k: v for k, v in json.loads(line).items() if k != "_meta"}
        for m in req["messages"]:
            if m.get("role") == "_input":
                m["role"] = "system"
        req["model"] = "scripted-model"
        prepared.append((i, req, hashlib.md5(json.dumps(req, sort_keys=True).encode()).hexdigest()))

    def valid_call(call: dict, tools: list[dict]) -> bool:
        schema = next((t["function"]["parameters"] for t in tools if t["function"]["name"] == call["function"]["name"]),
                      None)
        try:
            jsonschema.validate(json.loads(call["function"]["arguments"]), schema)
            return schema is not None
        except Exception:  # noqa: BLE001 - K2VV counts any failure as invalid
            return False

    async def one(i: int, req: dict, digest: str) -> dict:
        async with sem:
            t0 = time.time()
            try:
                resp, status = (await client.chat.completions.create(**req)).model_dump(), "success"
            except Exception as e:  # noqa: BLE001 - as the baseline does: every failure is a result
                resp, status = {"error": str(e)}, "failed"
            finish, valid = None, None
            if resp.get("choices"):
                finish = resp["choices"][0]["finish_reason"]
                calls = resp["choices"][0]["message"].get("tool_calls") or []
                if finish == "tool_calls" and calls:
                    valid = all(valid_call(c, req.get("tools", [])) for c in calls)
            return {"data_index": i, "request": req, "response": resp, "status": status, "finish_reason": finish,
                    "tool_calls_valid": valid, "duration_ms": int(1000 * (time.time() - t0)), "hash": digest}

    done: list[dict] = []
    for task in asyncio.as_completed([one(*p) for p in prepared]):
        res = await task
        done.append(res)
        with results_file.open("a") as fh:
            fh.write(json.dumps(res, ensure_ascii=False) + "\n")
        summary = {"success": sum(r["status"] == "success" for r in done),
                   "failed": sum(r["status"] != "success" for r in done),
                   "tool_calls": sum(r["finish_reason"] == "tool_calls" for r in done),
                   "valid": sum(bool(r["tool_calls_valid"]) for r in done)}
        print(f"[Stats] {summary}", file=sys.stderr)
    rows = {r["data_index"]: r for r in (json.loads(x) for x in results_file.read_text().splitlines())}
    results_file.write_text("".join(json.dumps(rows[k], ensure_ascii=False) + "\n" for k in sorted(rows)))
    (out / "summary.json").write_text(json.dumps(summary, indent=4))
    await client.close()
    return summary["success"]


def whole_run(mode: str, url: str, suite: Path, conc: int, k2vv_script: Path | None = None) -> dict:
    """Wall time of one whole run in a fresh process, and how many requests it got answered."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        if mode == "verifier-run":
            cmd = [sys.executable, "-m", "verifier.cli", "run", "--reference", f"bench={url}", "--suite", str(suite),
                   "--concurrency", str(conc), "--out", str(out), "--no-history", "--quiet"]
        elif mode == "k2vv":
            out.mkdir()
            cmd = [sys.executable, str(k2vv_script), str(suite), "--model", "scripted-model", "--base-url", url,
                   "--api-key", "bench", "--concurrency", str(conc), "--output", str(out / "results.jsonl"),
                   "--summary", str(out / "summary.json")]
        else:
            cmd = [sys.executable, __file__, "--k2vv-child", url, str(suite), str(out), "--concurrency", str(conc)]
            if mode == "k2vv-style+imports":
                cmd.append("--k2vv-module-imports")
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        wall = time.perf_counter() - t0
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
        if proc.returncode != 0:
            raise SystemExit(f"{mode} failed ({proc.returncode}): {proc.stderr.strip().splitlines()[-1:]}")
        if mode == "verifier-run":
            recs = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
            ok = sum(1 for r in recs if r["status"] == 200 and r["error_class"] is None)
        else:
            summary = json.loads((out / "summary.json").read_text())
            ok = summary["success_count"] if mode == "k2vv" else summary["success"]
    return {"mode": mode, "wall_s": wall, "cpu_s": cpu, "ok": ok, "n": sum(1 for _ in suite.open())}


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _sys() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_stime


async def _verifier(url: str, n: int, conc: int) -> tuple[float, float, int]:
    from verifier.http.client import EndpointClient
    from verifier.records import EndpointConfig, ExchangeRecord
    from verifier.run.store import RecordStore

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
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--modes", default="verifier-run,k2vv-style")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--k2vv-script", type=Path, help="a copy of K2-Vendor-Verifier's tool_calls_eval.py (mode k2vv)")
    ap.add_argument("--child", nargs=2, metavar=("MODE", "URL"), help=argparse.SUPPRESS)
    ap.add_argument("--k2vv-child", nargs=3, metavar=("URL", "SUITE", "OUT"), help=argparse.SUPPRESS)
    ap.add_argument("--k2vv-module-imports", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child[0], args.child[1], args.requests, args.concurrency)
        return
    if args.k2vv_child:
        url, suite, out = args.k2vv_child
        if args.k2vv_module_imports:  # what K2VV's tool_calls_eval imports at module level, used or not
            from tqdm.asyncio import tqdm_asyncio  # noqa: F401
            from transformers import AutoTokenizer  # noqa: F401
        asyncio.run(_k2vv_style(url, Path(suite), Path(out), args.concurrency))
        return
    server = subprocess.Popen([sys.executable, "-c", "from verifier.testing.scripted_server import main; main()"],
                              stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        port = int(server.stdout.readline().split()[1])
        url = f"http://127.0.0.1:{port}/v1"
        results: dict[str, list[dict]] = {m: [] for m in args.modes.split(",")}
        suite_dir = tempfile.TemporaryDirectory()
        suite = Path(suite_dir.name) / "bench.jsonl"
        write_suite(suite, args.requests)
        for run in range(args.runs):
            for mode in results:
                if mode in ("verifier-run", "k2vv", "k2vv-style", "k2vv-style+imports"):
                    if mode == "k2vv" and not (args.k2vv_script and args.k2vv_script.is_file()):
                        raise SystemExit("mode k2vv: pass --k2vv-script PATH (K2VV's tool_calls_eval.py)")
                    r = whole_run(mode, url, suite, args.concurrency, args.k2vv_script)
                    r["req_per_s"] = r["n"] / r["wall_s"]
                    results[mode].append(r)
                    print(f"run {run + 1} {mode:12s} whole run {r['wall_s']:.2f} s  process CPU {r['cpu_s']:.2f} s  "
                          f"ok {r['ok']}/{r['n']}", flush=True)
                    continue
                out = subprocess.run([sys.executable, __file__, "--child", mode, url, "--requests", str(args.requests),
                                      "--concurrency", str(args.concurrency)], capture_output=True, text=True, cwd=ROOT)
                if out.returncode != 0:
                    raise SystemExit(f"{mode} run failed: {out.stderr.strip().splitlines()[-1:]}")
                r = json.loads(out.stdout.strip().splitlines()[-1])
                r["req_per_s"] = r["n"] / r["wall_s"]
                r["cpu_ms_per_req"] = 1000 * r["cpu_s"] / r["n"]
                r["sys_ms_per_req"] = 1000 * r["sys_s"] / r["n"]
                results[mode].append(r)
                print(f"run {run + 1} {mode:12s} wall {r['wall_s']:.2f} s  {r['req_per_s']:.0f} req/s  "
                      f"client CPU {r['cpu_ms_per_req']:.3f} ms/req (kernel {r['sys_ms_per_req']:.3f})  "
                      f"ok {r['ok']}/{r['n']}", flush=True)
        suite_dir.cleanup()
        med = {m: {k: statistics.median(r[k] for r in rs)
                   for k in ("wall_s", "cpu_s", "req_per_s", "cpu_ms_per_req", "sys_ms_per_req") if k in rs[0]}
               for m, rs in results.items()}
        print(f"\nmedian of {args.runs}: {args.requests} requests, concurrency {args.concurrency}")
        for m, v in med.items():
            cpu = (f"  client CPU {v['cpu_ms_per_req']:.3f} ms/req (of which kernel {v['sys_ms_per_req']:.3f})"
                   if "cpu_ms_per_req" in v else "")
            if "cpu_ms_per_req" not in v:
                cpu = f"  process CPU {v['cpu_s']:.2f} s"
            print(f"  {m:12s} wall {v['wall_s']:.2f} s  {v['req_per_s']:.0f} req/s{cpu}")
        for base in ("k2vv", "k2vv-style", "k2vv-style+imports"):
            if "verifier-run" in med and base in med:
                ratio = med["verifier-run"]["wall_s"] / med[base]["wall_s"]
                cpu_ratio = med["verifier-run"]["cpu_s"] / med[base]["cpu_s"]
                print(f"  whole-run wall time verifier-run / {base}: {ratio:.2f} (goal: at most 0.33); "
                      f"process CPU ratio {cpu_ratio:.2f}")
        if "verifier" in med and "openai-sdk" in med:
            print(f"  throughput ratio verifier/openai-sdk: "
                  f"{med['verifier']['req_per_s'] / med['openai-sdk']['req_per_s']:.2f}x")
        if args.json:
            args.json.write_text(json.dumps({"runs": results, "median": med}, indent=2))
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    main()
