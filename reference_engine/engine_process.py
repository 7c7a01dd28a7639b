"""Engines in their own processes, started together and sharing what they can: for ``builtin:`` endpoints.

Why processes: the default run drives four engine variants and the harness at once. In one process every engine
loop, its HTTP server and the run's client take turns on one interpreter lock, and a 2-core machine ran the
default run on about 1.2 cores (issue #43). In its own process each engine has its own lock, and the operating
system spreads the engines and the harness over the cores.

Why forked (Linux), and what is shared: a child forked from the run inherits what the run has already imported
(torch and the server, about 2 s of CPU per child otherwise) and the tokenizer and weights the run read once per
checkpoint and weight format (:class:`SharedLoads`), copy-on-write. Two rules keep forking safe: the run reads
the weights with one intra-op thread, so it never starts an OpenMP pool (a forked child that uses its parent's
pool hangs), and only CPU engines that run single-threaded themselves are forked (a small model, the engine's own
default: :func:`reference_engine.engine.one_intra_op_thread`). Any other engine (a GPU one too: CUDA does not
survive a fork), and every engine off Linux, is a spawned child that imports and reads its own.

The child reports its port (or the one-line reason it could not start) on a pipe, then serves until the run sends
"stop" or goes away: it dies with the run (Linux's parent-death signal), and ignores Ctrl-C, which the terminal
sends to the whole process group: the run handles it and stops its engines.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import multiprocessing.context
import os
import signal
import sys
import time
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import TYPE_CHECKING

from reference_engine import engine_zygote
from reference_engine.config import ConfigError, EngineConfig

if TYPE_CHECKING:  # imported where used: the run that starts engines from the fork server never imports torch
    from reference_engine.loader import LoadedModel
    from reference_engine.tokenizer import Tokenizer

#: how long a started engine may take to answer before it counts as failed to start
START_TIMEOUT_S = 120.0
#: how long a stopped engine may take to exit before it is killed
STOP_TIMEOUT_S = 10.0
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


class EngineStartError(RuntimeError):
    """An engine process did not come up; the message is one line: the exception type and text, or why not."""


class SharedLoads:
    """One tokenizer per checkpoint folder and one weight load per weight format, for engines started together.

    The weights are read with one intra-op thread (restored afterwards), so that the reading process never starts
    an OpenMP pool its forked children would inherit broken.
    """

    def __init__(self) -> None:
        self._tokenizers: dict[str, Tokenizer] = {}
        self._models: dict[tuple, LoadedModel] = {}

    def get(self, config: EngineConfig) -> LoadedModel:
        import torch

        from reference_engine.loader import load_for, weights_key
        from reference_engine.tokenizer import Tokenizer

        if not config.model_path.is_dir():
            raise ConfigError(f"{config.model_path}: model folder not found")
        key = weights_key(config)
        if key not in self._models:
            folder = key[0]
            if folder not in self._tokenizers:
                self._tokenizers[folder] = Tokenizer(config.model_path)
            threads = torch.get_num_threads()
            torch.set_num_threads(1)
            try:
                self._models[key] = load_for(config, self._tokenizers[folder])
            finally:
                torch.set_num_threads(threads)
        return self._models[key]


def _child(config: EngineConfig, loaded: LoadedModel | None, conn: Connection, parent_pid: int | None) -> None:
    """In the engine process: start the engine and its HTTP server, say the port, serve until told to stop.

    ``parent_pid``: the run's pid when forked from it. A child of the fork server (None) dies with the fork
    server, which leaves when the run does."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        parent_gone = os.getppid() != parent_pid if parent_pid is not None else os.getppid() == 1
        if parent_gone:                 # it died before the signal was armed
            os._exit(0)
    try:
        from reference_engine.engine import Engine
        from reference_engine.launch import serve_engine

        # a fork server's child reads its own checkpoint, single-threaded as the run does (SharedLoads): read with
        # two threads, each engine spent ~7 % more CPU over the default run (15.0 vs 14.0 s; cause not pinned down)
        server = serve_engine(Engine(config, loaded or SharedLoads().get(config)))
    except Exception as e:  # noqa: BLE001 - any failure becomes one line for the run to show
        text = (str(e).strip().splitlines() or [""])[0][:300]
        conn.send(("error", f"{type(e).__name__}: {text}" if text else type(e).__name__))
        return
    conn.send(("ready", server.port))
    with contextlib.suppress(EOFError, OSError):
        conn.recv()  # "stop", or end of file when the run is gone
    server.stop()


class EngineProcess:
    """One engine in its own process; :meth:`wait_ready` gives its base URL, :meth:`stop` ends it."""

    def __init__(self, config: EngineConfig, shared: SharedLoads) -> None:
        """A CPU engine forks from the engine interpreter when this process started one
        (:mod:`reference_engine.engine_zygote`), reading its own checkpoint; else from this process, with the
        weights ``shared`` reads once per format, or, where forking is not safe, it is spawned."""
        self.config = config
        zygote = engine_zygote.context() if config.device == "cpu" else None
        if zygote is not None:
            if not config.model_path.is_dir():       # fail here, before a process starts
                raise ConfigError(f"{config.model_path}: model folder not found")
            ctx: multiprocessing.context.BaseContext = zygote
            loaded = None
            parent: int | None = None                # a fork server's child: its parent is not this process
        else:
            from reference_engine.engine import one_intra_op_thread

            fork = sys.platform.startswith("linux") and config.device == "cpu"
            loaded = shared.get(config) if fork else None  # a missing checkpoint fails here, before a process starts
            fork = fork and loaded is not None and one_intra_op_thread(config, loaded.model)
            ctx = multiprocessing.get_context("fork" if fork else "spawn")
            loaded = loaded if fork else None
            parent = os.getpid() if fork else None
        self._conn, child_conn = ctx.Pipe()
        self._process: BaseProcess = ctx.Process(  # type: ignore[attr-defined]
            target=_child, args=(config, loaded, child_conn, parent),
            name=f"reference-engine {config.served_model_name}", daemon=True)
        self._process.start()
        child_conn.close()
        self.base_url: str | None = None

    def wait_ready(self, deadline: float) -> str:
        """The engine's base URL (``http://127.0.0.1:PORT/v1``) once it serves; EngineStartError if it cannot."""
        if not self._conn.poll(max(0.0, deadline - time.monotonic())):
            raise EngineStartError(f"TimeoutError: the engine did not answer within {START_TIMEOUT_S:g} s")
        try:
            what, value = self._conn.recv()
        except (EOFError, OSError):
            self._process.join(1.0)
            raise EngineStartError(f"the engine process exited (code {self._process.exitcode}) before it served") \
                from None
        if what != "ready":
            raise EngineStartError(str(value))
        self.base_url = f"http://127.0.0.1:{value}/v1"
        return self.base_url

    def request_stop(self) -> None:
        """Ask the engine to finish (it stops its server and loop); :meth:`stop` waits for it. Why apart: a run
        asks all its engines first and then waits, so they wind down together."""
        with contextlib.suppress(OSError):
            self._conn.send("stop")

    def stop(self) -> None:
        """Ask the engine to finish (unless asked already), and kill it if it has not within the timeout."""
        self.request_stop()
        self._process.join(STOP_TIMEOUT_S)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()
        self._conn.close()
