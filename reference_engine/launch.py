"""Start the engine's HTTP server in-process (uvicorn on a background thread), for `builtin:` endpoints and tests."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import uvicorn

from reference_engine.config import SHIPPED_MODEL_NAME as SHIPPED_MODEL_NAME  # re-exported: launch's public names
from reference_engine.config import default_model_path as default_model_path
from reference_engine.config import engine_config
from reference_engine.engine import Engine
from reference_engine.server import DEFAULT_MAX_REQUEST_BYTES, create_app


class RunningServer:
    """A live server: `.base_url` (ends in /v1), `.engine`, `.stop()`; also a context manager."""

    def __init__(self, engine: Engine, server: uvicorn.Server, thread: threading.Thread, host: str, port: int) -> None:
        self.engine, self._server, self._thread = engine, server, thread
        self.host, self.port = host, port
        self.base_url = f"http://{host}:{port}/v1"
        self.model = engine.served_model_name

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=30)
        self.engine.stop()

    def __enter__(self) -> RunningServer:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def build_engine(model_path: str | Path | None = None, **options) -> Engine:
    return Engine(engine_config(model_path, **options))


def start_server(model_path: str | Path | None = None, *, kv_dtype: str = "bf16", weights: str = "bf16",
                 decode_weights: str | None = None, prefix_cache: bool = True, page_size: int = 16,
                 kv_budget_bytes: int | None = None, host: str = "127.0.0.1", port: int = 0,
                 served_model_name: str | None = None, max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
                 **engine_options) -> RunningServer:
    """Load the model, start the engine loop and uvicorn; returns once the port accepts connections.

    `max_request_bytes` caps request bodies (413 above it). `engine_options` are further EngineConfig fields (e.g.
    admission_timeout_s, max_waiting, allow_fault_injection).
    """
    engine = build_engine(model_path, kv_dtype=kv_dtype, weights=weights, decode_weights=decode_weights,
                          prefix_cache=prefix_cache, page_size=page_size, kv_budget_bytes=kv_budget_bytes,
                          served_model_name=served_model_name, **engine_options)
    return serve_engine(engine, host=host, port=port, max_request_bytes=max_request_bytes)


def serve_engine(engine: Engine, *, host: str = "127.0.0.1", port: int = 0,
                 max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES) -> RunningServer:
    """Start ``engine``'s loop and uvicorn on a background thread; returns once the port accepts connections."""
    engine.start()
    config = uvicorn.Config(create_app(engine, max_request_bytes=max_request_bytes), host=host, port=port,
                            log_level="warning", access_log=False,
                            lifespan="off", timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)  # uvicorn listens to signals only on the main thread: none are taken here
    thread = threading.Thread(target=server.run, name="reference-engine-http", daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            engine.stop()
            raise RuntimeError(f"reference engine HTTP server failed to start on {host}:{port}")
        time.sleep(0.01)
    real_port = server.servers[0].sockets[0].getsockname()[1]
    return RunningServer(engine, server, thread, host, real_port)
