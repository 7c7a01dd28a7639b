"""The engine's HTTP server under a huge request: how long /health takes to answer meanwhile, and what the huge
request gets back.

    python benchmarks/engine_bad_input.py [--mb 7.5 10] [--repeats 5]

Why: issue #32 §6 measured a 10 MB prompt blocking /health for 6-7 s. Bodies over the cap (8 MiB by default) get
413 before they are read whole; a prompt under the cap that cannot fit the context is refused before tokenising;
parsing, rendering and tokenising run on a worker thread. Prints, per body size, the huge request's status and time
and the slowest /health answer while it was in flight (median over repeats).
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time

import httpx

from reference_engine.launch import start_server


def one(base: str, model: str, mb: float) -> tuple[int, float, float]:
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": "word " * int(mb * 1024 * 1024 / 5)}],
                       "max_tokens": 1}).encode()
    out: dict = {}

    def big() -> None:
        t0 = time.perf_counter()
        r = httpx.post(base + "/v1/chat/completions", content=body, headers={"content-type": "application/json"},
                       timeout=120)
        out["status"], out["s"] = r.status_code, time.perf_counter() - t0

    t = threading.Thread(target=big)
    t.start()
    worst = 0.0
    with httpx.Client(timeout=30) as h:
        while t.is_alive():
            t0 = time.perf_counter()
            h.get(base + "/health")
            worst = max(worst, time.perf_counter() - t0)
            time.sleep(0.01)
    t.join()
    return out["status"], out["s"], worst


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, nargs="+", default=[7.5, 10.0])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    with start_server(threads=1) as srv:
        base = srv.base_url[: -len("/v1")]
        for mb in args.mb:
            runs = [one(base, srv.model, mb) for _ in range(args.repeats)]
            print(f"{mb:g} MB prompt: status {sorted({r[0] for r in runs})}, request median "
                  f"{statistics.median(r[1] for r in runs):.2f} s, slowest /health median "
                  f"{statistics.median(r[2] for r in runs) * 1000:.0f} ms (n={args.repeats})", flush=True)


if __name__ == "__main__":
    main()
