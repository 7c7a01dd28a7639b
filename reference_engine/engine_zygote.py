"""The built-in engines' interpreter, started before the run has imported anything heavy (Linux).

Why: ``verifier run`` spends its first second importing the harness on one core, and then forked its engines only
after it had imported PyTorch and the engine itself (another 1.5 s, on that same core), so the second core of a
2-core machine idled for about 3 s before the first engine served (issue #43). Here the console script's entry
starts Python's fork server (:mod:`multiprocessing.forkserver`) at once, preloading the engine's modules: it
imports them on the idle core while the run imports the harness, and every built-in engine is then forked from
it, an interpreter that has imported the engine but run no operator (so no OpenMP pool: forking is safe at any
thread count). The run itself never imports PyTorch.

This module must stay light (no torch, no engine imports): it runs before everything else.
"""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.context
import multiprocessing.forkserver
import sys

log = logging.getLogger(__name__)

#: what the fork server imports before forking engines: all an engine process needs (torch, the engine, its
#: server and loader), so that each engine only reads its checkpoint and starts serving
PRELOAD = ["reference_engine.engine_process", "reference_engine.launch", "reference_engine.loader"]

_context: multiprocessing.context.ForkServerContext | None = None


def start() -> None:
    """Start the fork server (once; Linux only, elsewhere a no-op): it preloads the engine in the background.

    If it cannot start (no Unix sockets, no process to spare), nothing is lost: the engines then start as they do
    without it, forked from the run."""
    global _context
    if _context is not None or not sys.platform.startswith("linux"):
        return
    ctx = multiprocessing.get_context("forkserver")
    try:
        ctx.set_forkserver_preload(PRELOAD)
        multiprocessing.forkserver.ensure_running()
    except (OSError, ValueError, RuntimeError) as e:
        log.debug("engine fork server not started (%s); engines will fork from the run", e)
        return
    _context = ctx


def context() -> multiprocessing.context.ForkServerContext | None:
    """The fork server's context when :func:`start` ran in this process, else None (engines start as before)."""
    return _context
