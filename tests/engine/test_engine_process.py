"""Engines in their own processes (``builtin:`` endpoints): shared reads per weight format, same answers as an engine
in this process, one-line failures, and the relay that hands engine events to the server's loop in order."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time

import httpx
import pytest

from reference_engine.engine_process import EngineProcess, EngineStartError, SharedLoads
from reference_engine.launch import engine_config, start_server
from reference_engine.relay import EventRelay

CHAT = {"messages": [{"role": "user", "content": "What is the weather in Paris?"}], "max_tokens": 12,
        "temperature": 0}


def _chat(base_url: str, model: str) -> dict:
    r = httpx.post(f"{base_url}/chat/completions", json={**CHAT, "model": model}, timeout=120)
    r.raise_for_status()
    return r.json()


def test_engines_of_one_weight_format_share_one_read_and_answer_as_in_process(llama_ckpt):
    shared = SharedLoads()
    configs = [engine_config(llama_ckpt, kv_dtype=kv, decode_weights=dw)
               for kv, dw in (("bf16", None), ("fp8", None), ("bf16", "int4"))]
    assert shared.get(configs[0]) is shared.get(configs[1])  # KV options only: one read
    assert shared.get(configs[2]) is not shared.get(configs[0])  # another decode format: its own weights
    assert shared.get(configs[2]).tokenizer is shared.get(configs[0]).tokenizer  # one tokenizer per checkpoint
    procs = [EngineProcess(c, shared) for c in configs]
    try:
        urls = [p.wait_ready(time.monotonic() + 120) for p in procs]
        assert all(p._process.pid != os.getpid() and p._process.is_alive() for p in procs)
        answers = [_chat(u, c.served_model_name or "") for u, c in zip(urls, configs)]
    finally:
        for p in procs:
            p.stop()
    assert not any(p._process.is_alive() for p in procs)
    for config, answer in zip(configs, answers):  # greedy: token for token what the same engine says in-process
        with start_server(llama_ckpt, kv_dtype=config.kv_dtype, decode_weights=config.decode_weights) as srv:
            here = _chat(srv.base_url, srv.model)
        assert answer["choices"][0]["message"] == here["choices"][0]["message"]
        assert answer["usage"]["completion_tokens"] == here["usage"]["completion_tokens"]


def test_an_engine_that_cannot_start_in_its_process_says_why_in_one_line(llama_ckpt):
    proc = EngineProcess(engine_config(llama_ckpt, kv_budget_bytes=1), SharedLoads())
    try:
        with pytest.raises(EngineStartError) as err:
            proc.wait_ready(time.monotonic() + 120)
    finally:
        proc.stop()
    text = str(err.value)
    assert text.startswith("ValueError: KV budget of 1 bytes") and "\n" not in text


def test_relay_hands_every_event_over_in_order_with_few_wakeups():
    async def main() -> tuple[list[list[int]], int]:
        loop = asyncio.get_running_loop()
        relay = EventRelay(loop)
        wakeups = 0
        drain = relay._drain

        def counted() -> None:
            nonlocal wakeups
            wakeups += 1
            drain()

        relay._drain = counted  # type: ignore[method-assign]
        queues: list[asyncio.Queue] = [asyncio.Queue() for _ in range(3)]
        n = 3000

        def engine() -> None:  # another thread, as the engine's loop is
            for i in range(n):
                relay.put(queues[i % 3], i)
                if i % 500 == 0:
                    time.sleep(0.01)

        t = threading.Thread(target=engine)
        t.start()
        got: list[list[int]] = [[], [], []]
        for k, q in enumerate(queues):
            while len(got[k]) < n // 3:
                got[k].append(await asyncio.wait_for(q.get(), 30))
        t.join()
        return got, wakeups

    got, wakeups = asyncio.run(main())
    assert got == [list(range(k, 3000, 3)) for k in range(3)]
    assert wakeups < 3000  # batched: far fewer loop wake-ups than events


@pytest.mark.slow
def test_an_engine_that_runs_multithreaded_is_spawned_and_still_serves(llama_ckpt):
    """A forked child cannot use an OpenMP pool its parent started (it hangs): such engines are spawned instead."""
    proc = EngineProcess(engine_config(llama_ckpt, threads=2), SharedLoads())
    try:
        assert type(proc._process).__name__ == "SpawnProcess"
        url = proc.wait_ready(time.monotonic() + 120)
        assert httpx.get(f"{url}/models", timeout=30).json()["data"][0]["id"] == llama_ckpt.name
    finally:
        proc.stop()
    assert not proc._process.is_alive()


ZYGOTE_RUN = """
import json, os, sys, time
import httpx
from reference_engine import engine_zygote
engine_zygote.start()                      # first, as the console script's entry does for `verifier run`
from reference_engine.config import engine_config
from reference_engine.engine_process import EngineProcess, SharedLoads
configs = [engine_config(sys.argv[1], kv_dtype=kv, threads=threads) for kv, threads in (("bf16", None), ("fp8", 2))]
procs = [EngineProcess(c, SharedLoads()) for c in configs]
urls = [p.wait_ready(time.monotonic() + 120) for p in procs]
chat = json.loads(sys.argv[2])
answers = [httpx.post(f"{u}/chat/completions", json={**chat, "model": c.served_model_name}, timeout=120).json()
           for u, c in zip(urls, configs)]
parents = [int(open(f"/proc/{p._process.pid}/stat").read().rsplit(")", 1)[1].split()[1]) for p in procs]
print(json.dumps({"torch": "torch" in sys.modules, "pids": [p._process.pid for p in procs], "run": os.getpid(),
                  "parents": parents, "answers": answers}), flush=True)
time.sleep(600)                            # until the test kills this run
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the engine interpreter is started early on Linux")
def test_engines_forked_from_the_early_interpreter_serve_and_die_with_the_run(llama_ckpt):
    """``verifier run`` starts the engines' interpreter first (reference_engine/engine_zygote.py): its engines, a
    multi-threaded one too, answer as an engine in this process; the run itself never imports torch; and when the
    run is killed, its engines go too (the fork server leaves with the run, and they with the fork server)."""
    run = subprocess.Popen([sys.executable, "-c", ZYGOTE_RUN, str(llama_ckpt), json.dumps(CHAT)],
                           stdout=subprocess.PIPE, text=True)
    try:
        line = run.stdout.readline() if run.stdout else ""
        assert line, "the run printed nothing"
        got = json.loads(line)
        assert got["torch"] is False
        assert all(parent != got["run"] for parent in got["parents"])     # forked by the fork server
        with start_server(llama_ckpt) as srv:
            here = _chat(srv.base_url, srv.model)
        for answer in got["answers"][:1]:                                  # bf16: token for token as in-process
            assert answer["choices"][0]["message"] == here["choices"][0]["message"]
        assert got["answers"][1]["usage"]["completion_tokens"] > 0          # fp8 with 2 threads: serves
    finally:
        run.kill()
        run.wait(30)
    deadline = time.monotonic() + 30
    while any(os.path.exists(f"/proc/{pid}") and "Z" not in _state(pid) for pid in got["pids"]):
        assert time.monotonic() < deadline, "an engine outlived the run"
        time.sleep(0.1)


def _state(pid: int) -> str:
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


def test_a_fork_server_that_cannot_start_leaves_the_old_way(monkeypatch):
    """No Unix sockets or no process to spare: the run goes on and its engines fork from it, as without one."""
    import multiprocessing.forkserver

    from reference_engine import engine_zygote

    def refuse() -> None:
        raise OSError("no sockets here")

    monkeypatch.setattr(multiprocessing.forkserver, "ensure_running", refuse)
    monkeypatch.setattr(engine_zygote, "_context", None)
    engine_zygote.start()
    assert engine_zygote.context() is None
