"""The ``logprob`` suite kind: teacher-forced KL of every candidate against the reference.

Per endpoint, the supported logprob methods are probed first (:mod:`verifier.kinds.logprob.probe`) and recorded.
Per case, the reference generates greedily (its continuation is the text every endpoint is then forced
on; a case may also carry a fixed ``continuation``), then each endpoint is measured by:

* **forced** (prefill path): plain-text cases through ``/v1/completions`` ``echo`` + ``logprobs`` on
  prompt + reference continuation (or vLLM ``prompt_logprobs``); on loopback engines that have the
  ``/v1/x/distributions`` extension, by exact full distributions (``exact``), KL computed at run time
  against the reference's stored distributions, along with the top-k estimate at k = 5, 10, 20;
* **generate** (decode path): chat (or completions for text cases) with ``logprobs`` + ``top_logprobs``
  at temperature 0; the candidate's own greedy output is compared with the reference's on the common
  prefix only, and the first divergent position is reported. This is the ordinary-looking request,
  and the only one that sees a quantization applied only when decoding (e.g. INT4 decode weights).

* **decode exact** (built-in engine, ``/v1/x/distributions`` with ``forced_token_ids``): the same continuations
  (the reference's greedy one, variant ``decode_exact``, and each sampled one, ``decode_exact_sample<j>``)
  teacher-forced through the engine's DECODE step on both sides: exact KL at every position of what generation
  computes, so a decode-only quantization is measured past the first greedy divergence.

* **sampled** (unbiased KL without full distributions): the reference samples ``kl_samples`` (default 3)
  continuations per case at temperature 1 with fixed seeds (``/v1/completions``, variant ``sample<j>``), and
  every endpoint is teacher-forced on each (echo + logprobs, variant ``forced_sample<j>``): the logprob each
  side gives the sampled tokens is all the k3 estimator needs (``verifier.kinds.logprob.estimator.sampled_kl``).

``kl_mean`` is reported only from exact distributions or the sampled path; top-k figures are lower bounds
(``kl_topk_lower``, see :mod:`verifier.kinds.logprob.scoring`). The method behind each
figure is in ``extra["method"]`` / ``extra["paths"]``. An endpoint without logprobs gets no KL metrics
and a note saying so (never KL 0).

Provider faults never vanish: a failed request is a record (counted, planned vs measured, in the result), an
odd 200 body (a distributions reply without ``shape``) is a ``malformed_response`` record, an exception while
measuring one case is a ``harness_error`` record for that case, and a probe that met a provider fault is
recorded as an error (variant ``probe_failed<N>``) and probed afresh on ``--resume``.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from suites import SUITES_DIR
from verifier.kinds.logprob.align import (
    LogprobFormatError,
)
from verifier.kinds.logprob.estimator import exact_kl, topk_from_full, topk_kl
from verifier.kinds.logprob.probe import ProbeResult, probe_endpoint
from verifier.kinds.logprob.scoring import score_logprob
from verifier.kinds.logprob.tracks import (
    CASE_ERROR,
    PROBE_CASE,
    PROBE_FAILED,
    SAMPLE_PREFIX,
    TOP_K,
    first_choice,
    generation_text,
)
from verifier.records import Exchange, ExchangeRecord, SuiteManifest
from verifier.run.exchange_guard import failed_exchange, one_line
from verifier.run.paths import inside_run
from verifier.run.protocol import RunContext
from verifier.run.request_plan import PlannedRequest
from verifier.run.summary import EndpointSuiteResult, InputProblem

DATA = SUITES_DIR / "logprob" / "logprob-core.jsonl"
BUILTIN_SUITES = {
    "logprob-core": "24 short prompts (plain text, chat, tool-call conversations): teacher-forced + decode-path KL",
    "logprob-smoke": "12 of them, for a quick check",
}
EXACT_KS = (5, 10, 20)
# continuations sampled from the reference per case (run option kl_samples=N): 3 gives logprob-smoke's 12 cases
# 36 sequences; the KL interval's clusters are the 12 prompts (a case's samples share it), above the 10 it needs
# (verifier.kinds.logprob.cluster_ci.MIN_CLUSTERS)
KL_SAMPLES = 3


def _decode_body(ids: list[int], start: int) -> dict[str, Any]:
    """Teacher-forced decode request: ids[:start] prefilled, ids[start:] through the decode step one by one."""
    return {"prompt": None, "prompt_token_ids": ids[:start], "forced_token_ids": ids[start:]}


def sample_seed(case_id: str, j: int) -> int:
    """The seed of the reference's j-th sampled continuation of a case: fixed, so a rerun samples the same."""
    return int.from_bytes(hashlib.sha256(f"{case_id}:{j}".encode()).digest()[:4], "little") & 0x7FFFFFFF


class LogprobCase(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    kind: Literal["text", "chat"]
    prompt: str | None = None
    messages: list[dict[str, Any]] | None = None
    tools: list[dict[str, Any]] | None = None
    max_tokens: int = Field(default=32, ge=1, le=512)
    continuation: str | None = None  # fixed reference continuation (else the reference generates it)
    smoke: bool = False

    def model_post_init(self, _: Any) -> None:
        if self.kind == "text" and not self.prompt:
            raise ValueError("a text case needs 'prompt'")
        if self.kind == "chat" and not self.messages:
            raise ValueError("a chat case needs 'messages'")


@dataclass
class LoadedLogprobSuite:
    manifest: SuiteManifest
    cases: list[LogprobCase]
    problems: list[InputProblem] = field(default_factory=list)
    # --option kl_profiles=FILE: fingerprint library (default suites/logprob/profiles.json)
    profiles_path: str | None = None


def load_cases(path: Path, *, strict: bool = False) -> tuple[list[LogprobCase], list[InputProblem]]:
    """Read a logprob JSONL; a bad line is skipped and reported as ``file:line: field: message``."""
    cases: list[LogprobCase] = []
    problems: list[InputProblem] = []
    if not path.is_file():
        raise FileNotFoundError(f"logprob suite {path}: no such file")
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            cases.append(LogprobCase.model_validate(json.loads(line)))
        except json.JSONDecodeError as e:
            msg = f"not JSON ({e.msg})"
        except ValidationError as e:
            err = e.errors()[0]
            loc = ".".join(str(x) for x in err["loc"]) or "case"
            msg = f"{loc}: {err['msg']}"
        else:
            continue
        if strict:
            raise ValueError(f"{path}:{n}: {msg}")
        problems.append(InputProblem(source=str(path), line=n, message=msg))
    ids = [c.id for c in cases]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise ValueError(f"{path}: duplicate case ids {dup[:5]}")
    return cases, problems


def _manifest(name: str, cases: list[LogprobCase], source: str, skipped: int) -> SuiteManifest:
    canon = "\n".join(json.dumps(c.model_dump(), sort_keys=True) for c in cases)
    return SuiteManifest(name=name, version="1", kind="logprob", case_count=len(cases),
                         content_hash=hashlib.sha256(canon.encode()).hexdigest(), source=source, skipped_lines=skipped)


# ---------------------------------------------------------------------------------------------------------------
# the kind
# ---------------------------------------------------------------------------------------------------------------

class DistributionsReplyError(ValueError):
    """A 200 distributions reply without the promised fields: a provider fault, recorded as malformed_response."""


def _b64_rows(data: Any) -> np.ndarray:
    """The ``[rows, vocab]`` float32 log-probabilities of a ``/x/distributions`` reply (checked, never KeyError)."""
    if not isinstance(data, dict):
        raise DistributionsReplyError("distributions reply is not an object")
    shape = data.get("shape")
    if not (isinstance(shape, list) and len(shape) == 2 and all(isinstance(x, int) and x >= 0 for x in shape)):
        raise DistributionsReplyError(f"distributions reply: 'shape' missing or not [rows, vocab] (got "
                                      f"{str(shape)[:40]})")
    try:
        raw = base64.b64decode(data.get("logprobs_b64") or "", validate=True)
        return np.frombuffer(raw, dtype="<f4").reshape(shape[0], shape[1])
    except (ValueError, TypeError) as e:
        raise DistributionsReplyError(f"distributions reply: logprobs_b64 does not hold {shape}: "
                                      f"{one_line(e)}") from None


def _token_ids(data: Any) -> list[int]:
    ids = data.get("token_ids") if isinstance(data, dict) else None
    if not (isinstance(ids, list) and all(isinstance(x, int) for x in ids)):
        raise DistributionsReplyError("distributions reply: 'token_ids' missing or not a list of integers")
    return ids


def _malformed(ex: Exchange, e: Exception) -> Exchange:
    """The exchange, classified: its 200 body did not have the shape the measurement needs."""
    return ex.model_copy(update={"error_class": "malformed_response", "error_message": one_line(e),
                                 "response": None})


class LogprobKind:
    kind = "logprob"
    needs_reference_first = True

    def __init__(self) -> None:
        self._index: dict[tuple, ExchangeRecord] = {}
        # this pass: (endpoint, prompt text) -> the prompt's token ids, as the endpoint tokenised it (``_exact``)
        self._prompt_ids: dict[tuple[str, str], list[int]] = {}
        # per record store: keys appended by this process, so a later pass does not count them as resumed
        self._live: dict[tuple[str, int], set[tuple]] = {}
        # per record store: (suite, endpoint) whose exact paths were added to the progress total (once, not per pass)
        self._totalled: dict[tuple[str, int], set[tuple[str, str]]] = {}

    # loading -----------------------------------------------------------------------------------------------
    def load(self, ref: str, options: dict) -> LoadedLogprobSuite:
        strict = bool(options.get("strict", False))
        if ref in BUILTIN_SUITES:
            cases, problems = load_cases(DATA, strict=strict)
            if ref == "logprob-smoke":
                cases = [c for c in cases if c.smoke]
            source = f"builtin:{ref}"
            name = ref
        else:
            path = Path(ref)
            cases, problems = load_cases(path, strict=strict)
            source, name = str(path), f"logprob-{path.stem}" if not path.stem.startswith("logprob") else path.stem
        limit = options.get("limit")
        if limit:
            cases = cases[: int(limit)]
        return LoadedLogprobSuite(manifest=_manifest(name, cases, source, len(problems)), cases=cases,
                                  problems=problems,
                                  profiles_path=options.get("kl_profiles"))

    def planned_exchanges(self, suite: LoadedLogprobSuite, ctx: RunContext) -> int:
        samples = int(ctx.options.get("kl_samples", KL_SAMPLES))
        # per case: generate, the forced top-k path, one forced request per sample; the exact paths are added to the
        # progress total once an endpoint's probe shows full distributions (``_exact_exchanges``)
        return len(ctx.endpoints) * (1 + (2 + samples) * len(suite.cases)) + samples * len(suite.cases)

    def planned_requests(self, suite: LoadedLogprobSuite, ctx: RunContext) -> list[PlannedRequest]:
        """One capability probe, then per case three requests (generate, the forced top-k path and, on the built-in
        engine, exact distributions) and one forced request per sampled continuation on every endpoint, and the
        samples themselves on the reference alone."""
        samples = int(ctx.options.get("kl_samples", KL_SAMPLES))
        probe = PlannedRequest(body={"messages": [{"role": "user", "content": "Say hello."}]}, count=1, max_tokens=3)
        out = [probe]
        for c in suite.cases:
            body = {"prompt": c.prompt} if c.kind == "text" else {"messages": c.messages, "tools": c.tools}
            out.append(PlannedRequest(body=body, count=3 + samples, max_tokens=c.max_tokens))
            if samples:
                out.append(PlannedRequest(body=body, count=samples, max_tokens=c.max_tokens, reference_only=True))
        return out

    # running -----------------------------------------------------------------------------------------------
    async def run(self, suite: LoadedLogprobSuite, ctx: RunContext) -> None:
        name = suite.manifest.name
        top_k = int(ctx.options.get("top_logprobs", TOP_K))
        # one read of what is already on disk (resume, or the reference pass), kept up to date on append
        on_disk = ctx.store.read(suite=name)
        self._index = {(r.suite, r.case_id, r.endpoint, r.variant): r for r in on_disk}
        self._prompt_ids = {}
        # --resume: what an earlier run recorded counts in this run's progress (once: this kind runs in passes)
        live = self._live.setdefault((str(getattr(ctx.store, "path", "")), id(ctx.store)), set())
        ctx.progress.advance_resumed(r for r in on_disk if r.kind == "logprob" and r.key() not in live
                                     and r.endpoint in ctx.endpoints)

        async def run_endpoint(ep: str) -> None:
            probe = await self._probe(name, ep, ctx)
            counted = self._totalled.setdefault((str(getattr(ctx.store, "path", "")), id(ctx.store)), set())
            if ctx.progress.total and (name, ep) not in counted:  # once per endpoint, though the kind runs in passes
                counted.add((name, ep))  # planned_exchanges cannot know which endpoints serve full distributions
                ctx.progress.set_total(ctx.progress.total + self._exact_exchanges(suite, probe, ctx))
            is_ref = ep == ctx.reference
            await asyncio.gather(*(self._guarded_case(name, case, ep, is_ref, probe, top_k, ctx)
                                   for case in suite.cases))

        # The reference first (every candidate is forced along its continuations), then the candidates at once:
        # one after another, a 2-core machine ran this suite on 1.3 cores. Their figures do not depend on it: the
        # built-in engine computes a request's rows alike in any batch (tests/engine/test_forced_decode.py).
        if ctx.reference in ctx.endpoints:
            await run_endpoint(ctx.reference)
        await asyncio.gather(*(run_endpoint(ep) for ep in ctx.endpoints if ep != ctx.reference))

    @staticmethod
    def _exact_exchanges(suite: LoadedLogprobSuite, probe: ProbeResult, ctx: RunContext) -> int:
        """Records an endpoint adds beyond ``planned_exchanges`` once its probe shows full distributions: per case the
        greedy and each sampled continuation through prefill (``exact``) and through decode (``exact_decode``)."""
        per_path = 1 + int(ctx.options.get("kl_samples", KL_SAMPLES))
        return len(suite.cases) * per_path * (probe.supported("exact") + probe.supported("exact_decode"))

    async def _guarded_case(self, suite: str, case: LogprobCase, ep: str, is_ref: bool, probe: ProbeResult,
                            top_k: int, ctx: RunContext) -> None:
        """One case on one endpoint; an exception becomes that case's error record, never the suite's end."""
        try:
            await self._run_case(suite, case, ep, is_ref, probe, top_k, ctx)
        except Exception as e:  # noqa: BLE001 - one case's failure is a record, not a lost suite
            self._append(ctx, failed_exchange(e, {"case": case.id, "endpoint": ep}), suite=suite, case_id=case.id,
                         endpoint=ep, variant=CASE_ERROR, extra={"method": "error"})

    def _append(self, ctx: RunContext, ex: Any, *, suite: str, case_id: str, endpoint: str, variant: str,
                extra: dict[str, Any]) -> ExchangeRecord:
        rec = ExchangeRecord(**ex.model_dump(), kind="logprob", suite=suite, case_id=case_id, endpoint=endpoint,
                             variant=variant, extra=extra)
        ctx.store.append(rec)
        self._live.setdefault((str(getattr(ctx.store, "path", "")), id(ctx.store)), set()).add(rec.key())
        self._index[(suite, case_id, endpoint, variant)] = rec
        ctx.progress.advance(error=not rec.ok, retried=max(0, rec.attempts - 1))
        return rec

    def _find(self, ctx: RunContext, suite: str, case_id: str, endpoint: str, variant: str) -> ExchangeRecord | None:
        return self._index.get((suite, case_id, endpoint, variant))

    async def _probe(self, suite: str, ep: str, ctx: RunContext) -> ProbeResult:
        old = self._find(ctx, suite, PROBE_CASE, ep, "probe")
        if old is not None:  # only a probe that met no provider fault is ever reused
            return ProbeResult.model_validate(old.extra["probe"])
        res = await probe_endpoint(ep, ctx.clients[ep], top=int(ctx.options.get("top_logprobs", TOP_K)))
        rhash = hashlib.sha256(f"probe:{ep}".encode()).hexdigest()
        errors = res.errors()
        if not errors:
            self._append(ctx, Exchange(request_hash=rhash, status=200), suite=suite, case_id=PROBE_CASE, endpoint=ep,
                         variant="probe", extra={"probe": res.model_dump()})
            return res
        n = 1 + sum(1 for k in self._index if k[:3] == (suite, PROBE_CASE, ep) and str(k[3]).startswith(PROBE_FAILED))
        msg = "logprob probe failed at the provider: " + "; ".join(f"{m}: {e}" for m, e in sorted(errors.items()))
        ex = Exchange(request_hash=rhash, status=None, error_class="probe_failed", error_message=msg[:500])
        self._append(ctx, ex, suite=suite, case_id=PROBE_CASE, endpoint=ep, variant=f"{PROBE_FAILED}{n}",
                     extra={"probe": res.model_dump()})
        return res

    async def _run_case(self, suite: str, case: LogprobCase, ep: str, is_ref: bool, probe: ProbeResult, top_k: int,
                        ctx: RunContext) -> None:
        client = ctx.clients[ep]
        done = ctx.store.done_keys()
        key = lambda variant: (suite, case.id, ep, 0, None, variant)  # noqa: E731
        # decode path: greedy generation with logprobs (ordinary-looking request)
        if key("generate") not in done:
            if case.kind == "chat" and probe.supported("chat_logprobs"):
                body: dict[str, Any] = {"messages": case.messages, "max_tokens": case.max_tokens, "temperature": 0,
                                        "logprobs": True, "top_logprobs": top_k}
                if case.tools:
                    body["tools"] = case.tools
                ex = await client.chat(body, stream=False)
                self._append(ctx, ex, suite=suite, case_id=case.id, endpoint=ep, variant="generate",
                             extra={"api": "chat", "method": "chat_logprobs", "top_k": top_k})
            elif case.kind == "text" and (probe.supported("completions_echo")
                                          or probe.supported("vllm_prompt_logprobs")):
                ex = await client.completions({"prompt": case.prompt, "max_tokens": case.max_tokens, "temperature": 0,
                                               "logprobs": top_k})
                self._append(ctx, ex, suite=suite, case_id=case.id, endpoint=ep, variant="generate",
                             extra={"api": "completions", "method": "completions_logprobs", "top_k": top_k})
        prompt_text = case.prompt
        if case.kind == "chat":
            tok = self._template(ctx)
            if tok is None:
                return  # chat prompts are teacher-forced only where the chat template is known
            try:
                prompt_text = tok.render_chat(case.messages or [], case.tools)
            except Exception:  # noqa: BLE001 - a template that rejects the case: decode path only
                return
        continuation = case.continuation
        if continuation is None:
            ref_gen = self._find(ctx, suite, case.id, ctx.reference, "generate")
            if ref_gen is None or not ref_gen.ok:
                return
            try:
                continuation = generation_text(ref_gen)
            except LogprobFormatError:
                continuation = first_choice(ref_gen).get("text") or ""
        if not continuation or prompt_text is None:  # a text case always has its prompt (checked at load)
            return
        text = prompt_text + continuation
        # forced path, exact distributions (built-in engine)
        if probe.supported("exact") and key("forced_exact") not in done:
            await self._exact(suite, case, ep, is_ref, prompt_text, text, ctx)
        # decode path, exact distributions: the same continuation teacher-forced through the engine's decode step
        if probe.supported("exact_decode") and key("decode_exact") not in done:
            await self._exact(suite, case, ep, is_ref, prompt_text, text, ctx, variant="decode_exact", decode=True)
        # forced path, top-k logprobs
        if probe.supported("completions_echo") and key("forced_echo") not in done:
            mt = probe.methods["completions_echo"].max_tokens or 0
            ex = await client.completions({"prompt": text, "max_tokens": mt, "echo": True, "logprobs": top_k,
                                           "temperature": 0})
            self._append(ctx, ex, suite=suite, case_id=case.id, endpoint=ep, variant="forced_echo",
                         extra={"method": "completions_echo", "generated_tokens": mt, "continuation": continuation,
                                "top_k": top_k})
        elif probe.supported("vllm_prompt_logprobs") and key("forced_vllm") not in done:
            ex = await client.completions({"prompt": text, "max_tokens": 1, "prompt_logprobs": top_k, "temperature": 0})
            self._append(ctx, ex, suite=suite, case_id=case.id, endpoint=ep, variant="forced_vllm",
                         extra={"method": "vllm_prompt_logprobs", "continuation": continuation, "top_k": top_k})

        if probe.supported("completions_echo"):
            await self._sampled(suite, case, ep, is_ref, prompt_text, probe, ctx)

    async def _sampled(self, suite: str, case: LogprobCase, ep: str, is_ref: bool, prompt_text: str,
                       probe: ProbeResult, ctx: RunContext) -> None:
        """Sampled-token path: the reference samples at temperature 1 (seeded); every endpoint is forced on it."""
        client = ctx.clients[ep]
        done = ctx.store.done_keys()
        for j in range(int(ctx.options.get("kl_samples", KL_SAMPLES))):
            variant = f"{SAMPLE_PREFIX}{j}"
            if is_ref and (suite, case.id, ep, 0, None, variant) not in done:
                ex = await client.completions({"prompt": prompt_text, "max_tokens": case.max_tokens,
                                               "temperature": 1.0, "top_p": 1.0, "seed": sample_seed(case.id, j),
                                               "logprobs": 1})
                self._append(ctx, ex, suite=suite, case_id=case.id, endpoint=ep, variant=variant,
                             extra={"api": "completions", "method": "sample", "seed": sample_seed(case.id, j)})
            sample = self._find(ctx, suite, case.id, ctx.reference, variant)
            if sample is None or not sample.ok:
                continue
            try:
                continuation = generation_text(sample)
            except LogprobFormatError:
                continuation = first_choice(sample).get("text") or ""
            if not continuation:
                continue
            if probe.supported("exact") and (suite, case.id, ep, 0, None, f"exact_{variant}") not in done:
                # full distributions along the sampled text: exact per-position KL, one sequence per sample
                await self._exact(suite, case, ep, is_ref, prompt_text, prompt_text + continuation, ctx,
                                  variant=f"exact_{variant}")
            if probe.supported("exact_decode") and (suite, case.id, ep, 0, None, f"decode_exact_{variant}") not in done:
                await self._exact(suite, case, ep, is_ref, prompt_text, prompt_text + continuation, ctx,
                                  variant=f"decode_exact_{variant}", decode=True)
            if (suite, case.id, ep, 0, None, f"forced_{variant}") in done:
                continue
            mt = probe.methods["completions_echo"].max_tokens or 0
            ex = await client.completions({"prompt": prompt_text + continuation, "max_tokens": mt, "echo": True,
                                           "logprobs": 1, "temperature": 0})
            self._append(ctx, ex, suite=suite, case_id=case.id, endpoint=ep, variant=f"forced_{variant}",
                         extra={"method": "sampled_k3", "generated_tokens": mt, "continuation": continuation,
                                "top_k": 1})

    def _template(self, ctx: RunContext) -> Any:
        """The reference model's tokenizer + chat template when known (shipped model, or --option tokenizer=DIR)."""
        if not hasattr(self, "_tok_cache"):
            self._tok_cache: dict[tuple, Any] = {}
        model = ctx.clients[ctx.reference].config.model
        key = (model, ctx.options.get("tokenizer"))
        if key not in self._tok_cache:
            from verifier.kinds.cache.token_accounting import TokenizerUnavailable, tokenizer_for

            try:
                self._tok_cache[key] = tokenizer_for(model, ctx.options.get("tokenizer"))
            except TokenizerUnavailable:
                self._tok_cache[key] = None
        return self._tok_cache[key]

    async def _exact(self, suite: str, case: LogprobCase, ep: str, is_ref: bool, prompt_text: str, text: str,
                     ctx: RunContext, variant: str = "forced_exact", decode: bool = False) -> None:
        """Full distributions: the reference's are kept on disk; a candidate's KL is computed right away.

        ``decode``: the continuation is teacher-forced through the engine's DECODE step (``forced_token_ids``), on
        both sides, so a decode-only quantization (INT4 decode weights, FP8 KV cache) is measured at every position."""
        client = ctx.clients[ep]
        # suite name and case id are data: encoded, and checked to stay inside the run folder (verifier.run.paths)
        ref_file = inside_run(Path(ctx.run_dir), "kl_exact", suite, case.id,
                              suffix=".npz" if variant == "forced_exact" else f".{variant}.npz")
        ref_file.parent.mkdir(parents=True, exist_ok=True)
        extra: dict[str, Any] = {"method": "exact", "computation": "decode" if decode else "prefill"}
        if is_ref:
            # the prompt's own tokens (where the continuation starts): asked once per prompt, since every variant of
            # a case (greedy and sampled continuations, prefill and decode) shares it; each ask prefilled the prompt
            # anew on the reference, on the stretch the candidates wait for
            p_ids = self._prompt_ids.get((ep, prompt_text))
            head = None
            if p_ids is None:
                _, head, ex0 = await client.post_json("/x/distributions", {"prompt": prompt_text,
                                                                             "prompt_token_ids": None, "start": 1})
                if head is None or not ex0.ok:
                    self._append(ctx, ex0, suite=suite, case_id=case.id, endpoint=ep, variant=variant, extra=extra)
                    return
            status, data, ex = await client.post_json("/x/distributions", {"prompt": text, "prompt_token_ids": None,
                                                                             "start": 1})
            if data is None or not ex.ok:
                self._append(ctx, ex, suite=suite, case_id=case.id, endpoint=ep, variant=variant, extra=extra)
                return
            try:
                ids = _token_ids(data)
                if p_ids is None:
                    p_ids = self._prompt_ids[(ep, prompt_text)] = _token_ids(head)
                full = _b64_rows(data)
                vocab = data.get("vocab_size")
                if not isinstance(vocab, int):
                    raise DistributionsReplyError("distributions reply: 'vocab_size' missing or not an integer")
            except DistributionsReplyError as e:
                self._append(ctx, _malformed(ex, e), suite=suite, case_id=case.id, endpoint=ep, variant=variant,
                             extra=extra)
                return
            start = 0
            while start < min(len(ids), len(p_ids)) and ids[start] == p_ids[start]:
                start += 1
            start = max(1, start)
            rows = full[start - 1:]  # with start 1, row r predicts token r + 1: keep predictions of ids[start:]
            if decode and start < len(ids):
                status, data, ex = await client.post_json("/x/distributions", _decode_body(ids, start))
                if data is None or not ex.ok:
                    self._append(ctx, ex, suite=suite, case_id=case.id, endpoint=ep, variant=variant, extra=extra)
                    return
                try:
                    rows = _b64_rows(data)
                except DistributionsReplyError as e:
                    self._append(ctx, _malformed(ex, e), suite=suite, case_id=case.id, endpoint=ep, variant=variant,
                                 extra=extra)
                    return
            # uncompressed: log-probabilities hardly compress (12.9 -> 10.6 MB on the default run), and zlib cost the
            # run 0.5 s of CPU here plus 0.1 s per candidate reading them back, on the reference's serial stretch
            np.savez(ref_file, logprobs=rows, token_ids=np.asarray(ids), start=start)
            extra.update(start=start, n_tokens=len(ids), vocab_size=vocab)
            ex.response = {"omitted": "full distributions stored in kl_exact/"}
            self._append(ctx, ex, suite=suite, case_id=case.id, endpoint=ep, variant=variant, extra=extra)
            return
        if not ref_file.is_file():
            return  # the reference has no exact distributions for this case (not built-in, or it failed)
        saved = np.load(ref_file)
        ids, start, ref_rows = saved["token_ids"].tolist(), int(saved["start"]), saved["logprobs"].astype(np.float64)
        if decode and start >= len(ids):
            return  # no continuation token to force
        body = _decode_body(ids, start) if decode else {"prompt": None, "prompt_token_ids": ids, "start": start}
        status, data, ex = await client.post_json("/x/distributions", body)
        cand_rows = None
        if data is not None and ex.ok:
            try:
                cand_rows = _b64_rows(data).astype(np.float64)
            except DistributionsReplyError as e:
                ex = _malformed(ex, e)
        if cand_rows is not None:
            if cand_rows.shape != ref_rows.shape:
                extra["error"] = f"shape {list(cand_rows.shape)} != reference {list(ref_rows.shape)}"
            else:
                tok = np.asarray(ids[start:])
                r_lp = ref_rows[np.arange(len(tok)), tok]
                c_lp = cand_rows[np.arange(len(tok)), tok]
                extra.update(kl=exact_kl(ref_rows, cand_rows).tolist(), ref_token_lp=r_lp.tolist(),
                             cand_token_lp=c_lp.tolist(),
                             same_top=(ref_rows.argmax(axis=1) == cand_rows.argmax(axis=1)).astype(int).tolist())
                for k in EXACT_KS:
                    est = topk_kl(topk_from_full(ref_rows, k), topk_from_full(cand_rows, k))
                    extra[f"kl_top{k}"] = est.kl.tolist()
                    extra[f"kl_top{k}_lower"] = est.lower.tolist()
            ex.response = {"omitted": "full distributions not stored for candidates"}
        self._append(ctx, ex, suite=suite, case_id=case.id, endpoint=ep, variant=variant, extra=extra)

    # scoring -----------------------------------------------------------------------------------------------
    def score(self, suite: LoadedLogprobSuite, records: list[ExchangeRecord], reference: str,
              endpoints: list[str]) -> list[EndpointSuiteResult]:
        return score_logprob(suite, records, reference, endpoints)


LOGPROB_KIND = LogprobKind()
