"""A loopback stand-in for OpenRouter: the per-model provider listing, and chat requests routed to the pinned provider.

Why: ``verifier endpoints import openrouter`` and the import -> run -> badge flow must be tested end to end without
the internet. This server answers ``GET /api/v1/models/{author}/{slug}/endpoints`` with a listing (the documented
response shape, written by the test) and forwards ``POST /api/v1/...`` to the upstream of the provider named by the
request's ``provider.only`` (the engine variants the test started), refusing, as OpenRouter does with
``allow_fallbacks = false``, a request that pins nothing it knows. ``GET /api/v1/models`` lists the model id.
Forwarding uses httpx; the server is uvicorn on a background thread.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response


class OpenRouterStub:
    """``with OpenRouterStub(listing, upstreams) as stub: stub.api_base`` (no path; ``/api/v1`` is added by users).

    ``listing``: the JSON body served for the model's endpoints listing. ``upstreams``: provider tag -> base URL of
    an OpenAI-compatible server (ending in ``/v1``). ``requests``: (tag, path) per forwarded request.
    """

    def __init__(self, listing: dict[str, Any], upstreams: dict[str, str]) -> None:
        self.listing = listing
        self.upstreams = upstreams
        self.requests: list[tuple[str, str]] = []
        self.model_id = str(listing.get("data", {}).get("id", "model"))
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _app(self) -> FastAPI:
        app = FastAPI()
        author, _, slug = self.model_id.partition("/")

        @app.get("/api/v1/models/{a}/{s}/endpoints")
        def listing(a: str, s: str) -> Response:
            if (a, s) != (author, slug):
                return JSONResponse({"error": {"code": 404, "message": "Model not found"}}, status_code=404)
            return JSONResponse(self.listing)

        @app.get("/api/v1/models")
        def models() -> Response:
            return JSONResponse({"data": [{"id": self.model_id}]})

        @app.post("/api/v1/{path:path}")
        async def forward(path: str, request: Request) -> Response:
            body = await request.json()
            provider = body.pop("provider", None) or {}
            only = [t for t in provider.get("only", []) if t in self.upstreams]
            if not only:
                return JSONResponse({"error": {"code": 404, "message": "No allowed providers are available for the "
                                                                      "selected model."}}, status_code=404)
            tag = only[0]
            self.requests.append((tag, path))
            body.pop("model", None)  # the upstream serves its own model id
            async with httpx.AsyncClient(timeout=120) as client:
                r = await client.post(f"{self.upstreams[tag].rstrip('/')}/{path}", json=body)
            return Response(r.content, status_code=r.status_code, media_type="application/json")

        return app

    def __enter__(self) -> OpenRouterStub:
        config = uvicorn.Config(self._app(), host="127.0.0.1", port=0, log_level="warning", access_log=False,
                                lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="openrouter-stub", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("openrouter stub did not start")
            time.sleep(0.01)
        self.port = self._server.servers[0].sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
