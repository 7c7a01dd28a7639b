"""OpenAI-compatible HTTP server over the engine (FastAPI).

Routes: GET /v1/models, GET /v1/models/{id}, POST /v1/chat/completions, POST /v1/completions, POST /v1/x/distributions
(exact next-token
distributions, see docs/CONTRACTS.md), GET /health, GET /metrics. Errors use OpenAI's shape
{"error": {"message", "type", "param", "code"}}. The Authorization header is accepted and never read or logged.

Under bad input: request bodies over `max_request_bytes` get 413 before they are read whole; chat-template rendering
and tokenisation run on a worker thread, so a huge prompt never stalls the event loop (/health, other streams); a
client that goes away, streamed or not, aborts its request in the engine.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from reference_engine.chat_template import ChatTemplateError, render_chat
from reference_engine.constraints import (
    ROOT_OBJECT,
    BannedTokens,
    Constraint,
    JsonConstraint,
    TokenTable,
    arguments_state,
)
from reference_engine.distributions import distributions as distributions_reply
from reference_engine.engine import (
    DistributionEvent,
    Engine,
    ErrorEvent,
    Event,
    FinishEvent,
    PromptLogprobsEvent,
    RequestRejected,
    TokenEvent,
)
from reference_engine.protocol import (
    ChatCompletionRequest,
    CompletionRequest,
    NamedToolChoice,
    first_error,
)
from reference_engine.relay import EventRelay
from reference_engine.replies import ChatPlan, Generation, TextDelta
from reference_engine.sequence import SamplingParams
from reference_engine.tool_parser import ParsedToolCall, StreamingToolSplitter, get_parser
from reference_engine.wire import (
    ApiError,
    BodyTooLarge,
    _call_deltas,
    _call_header,
    _error_payload,
    _find_stop,
    _finish_reason,
    _sse,
    error_response,
    read_body,
    until_disconnect,
)

#: default cap on a request body (413 above it); a prompt that fits the tiny model's context is a few KB
DEFAULT_MAX_REQUEST_BYTES = 8 * 1024 * 1024


class Server:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.tok = engine.tokenizer
        self.model_name = engine.served_model_name
        self.parser = get_parser("hermes")
        self.stop_text_ids = set(engine.eos_ids)
        cfg = engine.config
        self.fingerprint = f"re-w{cfg.weights}-d{cfg.decode_weight_format}-kv{cfg.kv_dtype}"
        self.tokens = self._token_table()
        self.max_token_bytes = max((len(b) for b in self.tokens.token_bytes if b), default=1)
        start_ids = self.tok.encode(self.parser.start_tag)
        self.start_tag_id = start_ids[0] if len(start_ids) == 1 else None
        self.end_tag_ids = tuple(self.tok.encode(self.parser.end_tag))
        self._relay: EventRelay | None = None  # made on the first request, on the server's event loop

    def _token_table(self) -> TokenTable:
        """The vocabulary as bytes for constrained decoding. Never inside JSON: special tokens and tokens whose text
        holds a tool-call tag (the parser would see the call end inside a string)."""
        size = self.engine.model_config.vocab_size
        n_tok = self.tok.vocab_size
        raw = [self.tok.token_bytes(i) if i < n_tok else None for i in range(size)]
        tags = (self.parser.start_tag.encode(), self.parser.end_tag.encode())
        banned = set(self.tok.special_ids) | {i for i, b in enumerate(raw) if b and any(t in b for t in tags)}
        return TokenTable(raw, banned, set(self.engine.eos_ids))

    # ---- engine bridge ----------------------------------------------------------------------------------------
    def _submit(self, prompt_ids: list[int], params: SamplingParams) -> tuple[str, asyncio.Queue]:
        loop = asyncio.get_running_loop()
        if self._relay is None or self._relay.loop is not loop:
            self._relay = EventRelay(loop)
        relay = self._relay
        q: asyncio.Queue = asyncio.Queue()
        rid = secrets.token_hex(8)

        def sink(ev: Event) -> None:  # called on the engine's thread: hand the event to this request's queue
            relay.put(q, ev)

        try:
            self.engine.submit(rid, prompt_ids, params, sink)
        except RequestRejected as e:
            raise ApiError(e.status, str(e), e.type,
                           code="context_length_exceeded" if e.status == 400 else None) from None
        return rid, q

    async def _collect(self, rid: str, q: asyncio.Queue, stop: list[str]) -> tuple[Generation, str | None]:
        """Run a request to the end (non-streaming). Returns the generation and, if a stop string hit, the text."""
        gen = Generation()
        text_ids: list[int] = []
        stopped: str | None = None
        try:
            while True:
                ev = await q.get()
                if isinstance(ev, TokenEvent):
                    if stopped is not None:
                        continue                    # produced between the stop string and the abort
                    gen.tokens.append(ev)
                    if stop:
                        text_ids.append(ev.choice.token_id)
                        text = self._text(text_ids)
                        cut = _find_stop(text, stop)
                        if cut is not None:
                            stopped = text[:cut]
                            self.engine.abort(rid, finish_reason="stop")
                elif isinstance(ev, PromptLogprobsEvent):
                    gen.prompt = ev
                elif isinstance(ev, DistributionEvent):
                    gen.distribution = ev
                elif isinstance(ev, FinishEvent):
                    if stopped is not None:
                        ev = FinishEvent("stop", ev.prompt_tokens, len(gen.tokens), ev.cached_tokens)
                    gen.finish = ev
                    return gen, stopped
                elif isinstance(ev, ErrorEvent):
                    gen.error = ev
                    return gen, None
        except asyncio.CancelledError:
            self.engine.abort(rid)
            raise

    def _text(self, ids: list[int]) -> str:
        return self.tok.decode([i for i in ids if i not in self.stop_text_ids], skip_special_tokens=False)

    # ---- chat -------------------------------------------------------------------------------------------------
    def _chat_plan(self, req: ChatCompletionRequest) -> ChatPlan:
        """Render and tokenise the conversation and choose the decoding constraint (runs on a worker thread).

        - a named function: the prompt ends with the call header up to ``"arguments":``; the model writes one JSON
          object, then the closing tag is forced.
        - "required": the prompt ends with the call tag; the output must start with the header of one of the tools
          (tokenised in context, so the ids are those the model would produce), then as above.
        - "none": the call tag is banned, so no call can start. ``response_format`` json_object: one JSON object.
        """
        if not self.tok.chat_template:
            raise ApiError(400, "this model has no chat template; use /v1/completions", param="messages")
        messages = [m.model_dump(exclude_none=True) for m in req.messages]
        tools = [t.model_dump(exclude_none=True) for t in req.tools] if req.tools else None
        try:
            text = render_chat(self.tok.chat_template, messages, tools=tools, add_generation_prompt=True,
                               bos_token=self.tok.bos_token, eos_token=self.tok.eos_token,
                               **(req.chat_template_kwargs or {}))
        except ChatTemplateError as e:
            raise ApiError(400, f"the chat template rejected the messages: {e}", param="messages") from None
        self._check_length(text)
        parse_tools = bool(req.tools) and req.tool_choice != "none" and not req.json_object
        stops = self.end_tag_ids if (parse_tools and req.parallel_tool_calls is False and
                                     len(self.end_tag_ids) == 1) else ()
        if isinstance(req.tool_choice, NamedToolChoice):
            header = _call_header(req.tool_choice.function.name)
            forced = self.parser.start_tag + header
            return ChatPlan(self.tok.encode(text + forced), forced,
                            JsonConstraint(self.tokens, arguments_state(header), tail=self.end_tag_ids), True, stops)
        if req.tool_choice == "required":
            forced = self.parser.start_tag
            base = self.tok.encode(text + forced)
            starts = []
            for t in req.tools or []:
                full = self.tok.encode(text + forced + _call_header(t.function.name))
                if full[:len(base)] == base and len(full) > len(base):
                    starts.append(tuple(full[len(base):]))
            # tool names match ^[a-zA-Z0-9_-]+$, so every header leaves the JSON automaton in the same state
            state = arguments_state(_call_header("f")) if starts else ROOT_OBJECT
            return ChatPlan(base, forced, JsonConstraint(self.tokens, state, tuple(starts), self.end_tag_ids),
                            True, stops)
        constraint: Constraint | None = None
        if req.json_object:
            constraint = JsonConstraint(self.tokens, ROOT_OBJECT)
        elif req.tools and req.tool_choice == "none" and self.start_tag_id is not None:
            constraint = BannedTokens(self.tokens, (self.start_tag_id,))
        return ChatPlan(self.tok.encode(text), "", constraint, parse_tools, stops)

    def _check_length(self, text: str) -> None:
        """Refuse at once a prompt that cannot fit the context whatever its tokenisation (a token covers at most
        `max_token_bytes` bytes), so a 10 MB prompt is not tokenised only to be refused."""
        n = len(text.encode("utf-8", errors="replace"))
        if n > self.max_token_bytes * self.engine.max_model_len:
            raise ApiError(400, f"the prompt ({n} bytes) cannot fit the model's context of "
                                f"{self.engine.max_model_len} tokens", param="messages",
                           code="context_length_exceeded")

    def _params(self, req, prompt_len: int, max_tokens: int | None, **extra) -> SamplingParams:
        room = self.engine.max_model_len - prompt_len
        if max_tokens is None:
            max_tokens = max(room, 0)
        elif max_tokens > room:
            raise ApiError(400, f"max_tokens ({max_tokens}) + prompt ({prompt_len} tokens) exceeds the context length "
                                f"{self.engine.max_model_len}", param="max_tokens", code="context_length_exceeded")
        kw = req.sampling_kwargs()
        if bad := [t for t in kw["logit_bias"] or () if t >= self.engine.model_config.vocab_size][:1]:
            raise ApiError(400, f"logit_bias names token id {bad[0]}, outside the vocabulary", param="logit_bias")
        return SamplingParams(max_tokens=max_tokens, **kw, **extra)

    def _logprob_entry(self, token_id: int, logprob: float, top: list[tuple[int, float]]) -> dict:
        b = self.tok.token_bytes(token_id)
        return {"token": b.decode("utf-8", errors="replace"), "logprob": logprob, "bytes": list(b),
                "top_logprobs": [{"token": self.tok.token_text(t), "logprob": lp,
                                  "bytes": list(self.tok.token_bytes(t))}
                                 for t, lp in top]}

    def _usage(self, fin: FinishEvent) -> dict:
        return {"prompt_tokens": fin.prompt_tokens, "completion_tokens": fin.completion_tokens,
                "total_tokens": fin.prompt_tokens + fin.completion_tokens,
                "prompt_tokens_details": {"cached_tokens": fin.cached_tokens}}

    async def chat(self, raw: bytes) -> Response:
        try:
            req = await asyncio.to_thread(ChatCompletionRequest.model_validate_json, raw)
        except ValidationError as e:
            msg, param = first_error(e)
            raise ApiError(400, msg, param=param) from None
        self._check_model(req.model)
        plan = await asyncio.to_thread(self._chat_plan, req)
        prompt_ids, forced, parse_tools = plan.prompt_ids, plan.forced, plan.parse_tools
        max_tokens = req.max_completion_tokens or req.max_tokens
        params = self._params(req, len(prompt_ids), max_tokens, logprobs=bool(req.logprobs),
                              top_logprobs=req.top_logprobs or 0, constraint=plan.constraint,
                              stop_token_ids=plan.stop_token_ids)
        rid, q = self._submit(prompt_ids, params)
        try:
            return await self._chat_reply(rid, q, req, forced, parse_tools)
        except asyncio.CancelledError:       # the client went away before the reply was built (see create_app)
            self.engine.abort(rid)
            raise

    async def _chat_reply(self, rid: str, q: asyncio.Queue, req: ChatCompletionRequest, forced: str,
                          parse_tools: bool) -> Response:
        if req.stream:
            first = await q.get()
            if isinstance(first, ErrorEvent):
                return error_response(first.status, first.message, first.type, code=first.code)
            include_usage = bool(req.stream_options and req.stream_options.include_usage)
            return StreamingResponse(self._chat_stream(rid, q, first, req, forced, parse_tools, include_usage),
                                     media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
        gen, stopped_text = await self._collect(rid, q, req.stop_list())
        if gen.error:
            return error_response(gen.error.status, gen.error.message, gen.error.type, code=gen.error.code)
        ids = [t.choice.token_id for t in gen.tokens]
        text = stopped_text if stopped_text is not None else self._text(ids)
        text = forced + text
        parse = self.parser.parse_forced if forced else self.parser.parse
        content, calls = (parse(text) if parse_tools else (text, []))
        finish = _finish_reason(calls, gen.finished().reason)
        message: dict = {"role": "assistant", "content": content if (content or not calls) else None}
        if calls:
            message["tool_calls"] = [c.to_openai() for c in calls]
        choice: dict = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
        if req.logprobs:
            choice["logprobs"] = {"content": [self._logprob_entry(t.choice.token_id, t.choice.logprob, t.choice.top)
                                              for t in gen.tokens if t.choice.token_id not in self.stop_text_ids]}
        return JSONResponse({"id": "chatcmpl-" + rid, "object": "chat.completion", "created": int(time.time()),
                             "model": self.model_name, "system_fingerprint": self.fingerprint,
                             "choices": [choice], "usage": self._usage(gen.finished())})

    async def _chat_stream(self, rid: str, q: asyncio.Queue, first, req: ChatCompletionRequest, forced: str,
                           parse_tools: bool, include_usage: bool) -> AsyncIterator[bytes]:
        created = int(time.time())
        base = {"id": "chatcmpl-" + rid, "object": "chat.completion.chunk", "created": created,
                "model": self.model_name, "system_fingerprint": self.fingerprint}

        def chunk(delta: dict, finish: str | None = None, logprobs: list | None = None) -> bytes:
            c = {"index": 0, "delta": delta, "logprobs": {"content": logprobs} if logprobs is not None else None,
                 "finish_reason": finish}
            return _sse({**base, "choices": [c]})

        splitter = StreamingToolSplitter(self.parser) if parse_tools else None
        done = False
        try:
            yield chunk({"role": "assistant", "content": ""})
            # the forced header (named/required tool_choice) starts the text _text_deltas streams, so the
            # splitter sees it once, in order, like any generated text
            async for step in self._text_deltas(rid, q, first, req.stop_list(), forced):
                if step.error is not None:
                    yield _sse(_error_payload(step.error))
                    yield b"data: [DONE]\n\n"
                    done = True
                    return
                delta = step.text
                if splitter is not None and delta:
                    delta = splitter.push(delta)
                if step.token is None:  # the final flush: whatever was held back, then the parsed calls
                    calls: list[ParsedToolCall] = []
                    if splitter is not None:
                        more, calls = splitter.finish(forced=bool(forced))
                        delta += more
                    if delta:
                        yield chunk({"content": delta})
                    for i, c in enumerate(calls):
                        for piece in _call_deltas(i, c):
                            yield chunk({"tool_calls": [piece]})
                    yield chunk({}, finish=_finish_reason(calls, step.finished().reason))
                    if include_usage:
                        yield _sse({**base, "choices": [], "usage": self._usage(step.finished())})
                    continue
                tid = step.token.choice.token_id
                lp = None
                if req.logprobs and tid not in self.stop_text_ids:
                    lp = [self._logprob_entry(tid, step.token.choice.logprob, step.token.choice.top)]
                if delta or lp:
                    yield chunk({"content": delta} if delta else {}, logprobs=lp)
            yield b"data: [DONE]\n\n"
            done = True
        finally:
            if not done:
                self.engine.abort(rid)

    async def _text_deltas(self, rid: str, q: asyncio.Queue, first, stop: list[str],
                           forced: str = "") -> AsyncIterator[TextDelta]:
        """The text side of every stream, shared by chat and completions: decode the tokens as they come
        (after any ``forced`` prefix), hold text back while it could still turn into a stop string or while it
        ends inside a multi-byte character, cut at a completed stop string (aborting the request and counting
        only the tokens up to it), and flush what was held back with the FinishEvent at the end."""
        hold = max((len(x) for x in stop), default=1) - 1
        ids: list[int] = []
        text = forced
        sent = 0
        finish_ev: FinishEvent | None = None
        ev = first
        while True:
            if isinstance(ev, ErrorEvent):
                yield TextDelta("", sent, error=ev)
                return
            if isinstance(ev, FinishEvent):
                finish_ev = ev
                break
            if isinstance(ev, TokenEvent):
                ids.append(ev.choice.token_id)
                text = forced + self._text(ids)
                cut = _find_stop(text[len(forced):], stop) if stop else None
                if cut is not None:
                    text = text[:len(forced) + cut]
                    self.engine.abort(rid, finish_reason="stop")
                    finish_ev = await self._drain_to_finish(q, len(ids))
                end = len(text) if (cut is not None or not stop) else max(len(text) - hold, sent)
                if cut is None and text.endswith("\ufffd"):
                    end = min(end, len(text) - 1)
                start, sent = sent, max(sent, end)
                yield TextDelta(text[start:sent], start, token=ev)
                if finish_ev is not None:
                    break
            ev = await q.get()
        # whatever was held back (a stop-string prefix that never completed, a split character) goes now
        yield TextDelta(text[sent:], sent, finish=finish_ev)

    @staticmethod
    async def _drain_to_finish(q: asyncio.Queue, n_tokens: int) -> FinishEvent:
        """After a stop-string abort: the engine's FinishEvent carries the usage; count only tokens up to the stop."""
        while True:
            ev = await q.get()
            if isinstance(ev, FinishEvent):
                return FinishEvent("stop", ev.prompt_tokens, n_tokens, ev.cached_tokens)
            if isinstance(ev, ErrorEvent):
                return FinishEvent("stop", 0, n_tokens, 0)

    # ---- completions ------------------------------------------------------------------------------------------
    async def completions(self, raw: bytes) -> Response:
        try:
            req = await asyncio.to_thread(CompletionRequest.model_validate_json, raw)
        except ValidationError as e:
            msg, param = first_error(e)
            raise ApiError(400, msg, param=param) from None
        self._check_model(req.model)
        if req.stream and req.echo:
            raise ApiError(400, "echo is not supported with stream on /v1/completions; use echo without stream "
                           "for prompt logprobs", param="echo")
        prompt = req.single_prompt()
        if isinstance(prompt, str):
            self._check_length(prompt)
            prompt_ids = await asyncio.to_thread(self.tok.encode, prompt, add_special_tokens=True)
        else:
            prompt_ids = list(prompt)
        if not prompt_ids:
            raise ApiError(400, "the prompt has no tokens", param="prompt")
        max_tokens = 16 if req.max_tokens is None else req.max_tokens
        want_prompt_lp = req.echo and req.logprobs is not None
        params = self._params(req, len(prompt_ids), max_tokens, logprobs=req.logprobs is not None,
                              top_logprobs=req.logprobs or 0,
                              prompt_logprobs=(req.logprobs or 0) if want_prompt_lp else None)
        rid, q = self._submit(prompt_ids, params)
        try:
            return await self._completion_reply(rid, q, req, prompt, prompt_ids, want_prompt_lp)
        except asyncio.CancelledError:
            self.engine.abort(rid)
            raise

    async def _completion_reply(self, rid: str, q: asyncio.Queue, req: CompletionRequest, prompt, prompt_ids,
                                want_prompt_lp: bool) -> Response:
        if req.stream:
            first = await q.get()
            if isinstance(first, ErrorEvent):
                return error_response(first.status, first.message, first.type, code=first.code)
            include_usage = bool(req.stream_options and req.stream_options.include_usage)
            return StreamingResponse(self._completion_stream(rid, q, first, req, include_usage),
                                     media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
        gen, stopped_text = await self._collect(rid, q, req.stop_list())
        if gen.error:
            return error_response(gen.error.status, gen.error.message, gen.error.type, code=gen.error.code)
        out_ids = [t.choice.token_id for t in gen.tokens]
        completion = stopped_text if stopped_text is not None else self._text(out_ids)
        prompt_text = prompt if isinstance(prompt, str) else self.tok.decode(prompt_ids, skip_special_tokens=False)
        choice: dict = {"index": 0, "text": (prompt_text + completion) if req.echo else completion,
                        "logprobs": None, "finish_reason": gen.finished().reason}
        if req.logprobs is not None:
            choice["logprobs"] = self._legacy_logprobs(gen, want_prompt_lp)
        return JSONResponse({"id": "cmpl-" + rid, "object": "text_completion", "created": int(time.time()),
                             "model": self.model_name, "system_fingerprint": self.fingerprint,
                             "choices": [choice], "usage": self._usage(gen.finished())})

    async def _completion_stream(self, rid: str, q: asyncio.Queue, first, req: CompletionRequest,
                                 include_usage: bool) -> AsyncIterator[bytes]:
        """Legacy completions as SSE: a text delta per token (held back while it could still become a stop
        string, or while it ends inside a multi-byte character), per-token logprobs in the legacy shape, a
        final chunk with finish_reason, an optional usage chunk, then [DONE]; an engine error is an error event."""
        base = {"id": "cmpl-" + rid, "object": "text_completion", "created": int(time.time()),
                "model": self.model_name, "system_fingerprint": self.fingerprint}

        def chunk(text: str, finish: str | None = None, logprobs: dict | None = None) -> bytes:
            return _sse({**base, "choices": [{"index": 0, "text": text, "logprobs": logprobs,
                                              "finish_reason": finish}]})

        done = False
        try:
            async for step in self._text_deltas(rid, q, first, req.stop_list()):
                if step.error is not None:
                    yield _sse(_error_payload(step.error))
                    yield b"data: [DONE]\n\n"
                    done = True
                    return
                if step.token is None:  # the final flush
                    if step.text:
                        yield chunk(step.text)
                    yield chunk("", finish=step.finished().reason)
                    if include_usage:
                        yield _sse({**base, "choices": [], "usage": self._usage(step.finished())})
                    continue
                tid = step.token.choice.token_id
                lp = None
                if req.logprobs is not None and tid not in self.stop_text_ids:
                    top = step.token.choice.top
                    lp = {"tokens": [self.tok.token_text(tid)], "token_logprobs": [step.token.choice.logprob],
                          "top_logprobs": [None if top is None else {self.tok.token_text(t): v for t, v in top}],
                          "text_offset": [step.offset]}
                if step.text or lp:
                    yield chunk(step.text, logprobs=lp)
            yield b"data: [DONE]\n\n"
            done = True
        finally:
            if not done:
                self.engine.abort(rid)

    def _legacy_logprobs(self, gen: Generation, with_prompt: bool) -> dict:
        tokens: list[str] = []
        token_lps: list[float | None] = []
        tops: list[dict | None] = []
        offsets: list[int] = []
        pos = 0

        def add(tid: int, lp: float | None, top: list[tuple[int, float]] | None) -> None:
            nonlocal pos
            s = self.tok.token_text(tid)
            tokens.append(s)
            token_lps.append(lp)
            tops.append(None if top is None else {self.tok.token_text(t): v for t, v in top})
            offsets.append(pos)
            pos += len(s)

        if with_prompt and gen.prompt is not None:
            for tid, lp, top in zip(gen.prompt.token_ids, gen.prompt.logprobs, gen.prompt.top):
                add(tid, lp, top)
        for t in gen.tokens:
            if t.choice.token_id not in self.stop_text_ids:
                add(t.choice.token_id, t.choice.logprob, t.choice.top)
        return {"tokens": tokens, "token_logprobs": token_lps, "top_logprobs": tops, "text_offset": offsets}

    # ---- distributions extension (reference_engine.distributions) -------------------------------------------
    async def distributions(self, raw: bytes) -> Response:
        return await distributions_reply(self, raw)

    def _check_model(self, model: str | None) -> None:
        if model is not None and model != self.model_name:
            raise ApiError(404, f"The model '{model}' does not exist (this server serves '{self.model_name}')",
                           "invalid_request_error", param="model", code="model_not_found")


def create_app(engine: Engine, *, max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES) -> FastAPI:
    srv = Server(engine)
    app = FastAPI(title="reference_engine", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.server = srv

    @app.exception_handler(ApiError)
    async def _api_error(_: Request, exc: ApiError) -> JSONResponse:
        return exc.response()

    @app.exception_handler(BodyTooLarge)
    async def _too_large(_: Request, exc: BodyTooLarge) -> JSONResponse:
        return error_response(413, f"the request body is larger than this server's limit of {max_request_bytes} "
                                   "bytes", code="request_too_large")

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return error_response(exc.status_code, str(exc.detail), "invalid_request_error")

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        return error_response(500, f"internal error: {type(exc).__name__}", "server_error")

    @app.get("/health")
    async def health() -> dict:
        return {"status": "ok"}

    @app.get("/metrics")
    async def metrics() -> PlainTextResponse:
        return PlainTextResponse(engine.metrics.prometheus(engine.gauges()))

    def model_card() -> dict:
        return {"id": srv.model_name, "object": "model", "created": 0, "owned_by": "reference_engine",
                "max_model_len": engine.max_model_len}

    @app.get("/v1/models")
    async def models() -> dict:
        return {"object": "list", "data": [model_card()]}

    @app.get("/v1/models/{model_id:path}")
    async def model(model_id: str) -> dict:
        srv._check_model(model_id)
        return model_card()

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        body = await read_body(request, max_request_bytes)
        return await until_disconnect(request, srv.chat(body))

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        body = await read_body(request, max_request_bytes)
        return await until_disconnect(request, srv.completions(body))

    @app.post("/v1/x/distributions")
    async def distributions(request: Request) -> Response:
        body = await read_body(request, max_request_bytes)
        return await until_disconnect(request, srv.distributions(body))

    return app
