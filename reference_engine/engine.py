"""The engine: owns the model, the KV pool, the block manager and the scheduler, and runs the step loop.

The loop runs on one background thread (all torch work happens there); the server hands requests in through a
thread-safe inbox and gets events back through a callback per request. `step()` is public so tests can drive the
engine synchronously without a thread.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass

import torch

from reference_engine import kernels
from reference_engine.block_manager import BlockManager
from reference_engine.config import ConfigError, EngineConfig
from reference_engine.dense_kv import DenseKV
from reference_engine.forced import force_choices, forced_rows
from reference_engine.kv_cache import KVPool
from reference_engine.loader import LoadedModel, load_for
from reference_engine.metrics import EngineMetrics
from reference_engine.model import BATCH_INVARIANT_ROWS, AttnMetadata, PrefillSegment
from reference_engine.sampler import TokenChoice, sample
from reference_engine.scheduler import QueueFull, Scheduler
from reference_engine.sequence import SamplingParams, SeqStatus, Sequence

log = logging.getLogger(__name__)

IDLE_RELEASE_S = 0.5               # an engine idle this long frees its dense K/V buffers (dense_kv.py)
DENSE_KV_MAX_BYTES = 128 << 20     # CPU decode: largest dense copy of a batch's K/V (dense_kv.py); beyond, gather pages


# ---- events sent back to a request's sink -------------------------------------------------------------------------
@dataclass
class TokenEvent:
    choice: TokenChoice


@dataclass
class PromptLogprobsEvent:
    token_ids: list[int]
    logprobs: list[float | None]                       # first is None (nothing predicts the first token)
    top: list[list[tuple[int, float]] | None]


@dataclass
class DistributionEvent:
    logprobs: torch.Tensor                             # float32 [rows, V]


@dataclass
class FinishEvent:
    reason: str                                        # stop | length
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int


@dataclass
class ErrorEvent:
    status: int
    type: str
    message: str
    code: str | None = None


Event = TokenEvent | PromptLogprobsEvent | DistributionEvent | FinishEvent | ErrorEvent
Sink = Callable[[Event], None]


class RequestRejected(RuntimeError):
    def __init__(self, status: int, type_: str, message: str) -> None:
        super().__init__(message)
        self.status, self.type = status, type_


#: below this many parameters a CPU engine runs torch with one intra-op thread (see Engine._set_threads)
SMALL_MODEL_PARAMS = 50_000_000


def one_intra_op_thread(config: EngineConfig, model: torch.nn.Module) -> bool:
    """Whether an engine of ``config`` serving ``model`` runs torch single-threaded (asked, or a small CPU model)."""
    if config.threads:
        return config.threads == 1
    return config.device == "cpu" and sum(p.numel() for p in model.parameters()) < SMALL_MODEL_PARAMS


class Engine:
    def __init__(self, config: EngineConfig, loaded: LoadedModel | None = None) -> None:
        """``loaded``: the tokenizer and weights already read for this config (engines of one weight format share
        them, see reference_engine/engine_process.py); read here when None."""
        self.config = config
        if not config.model_path.is_dir():
            raise ConfigError(f"{config.model_path}: model folder not found")
        loaded = loaded or load_for(config)
        self.tokenizer, self.model_config, self.model = loaded.tokenizer, loaded.model_config, loaded.model
        self._set_threads()
        budget = config.kv_budget_bytes or config.default_kv_budget_bytes
        self.pool = KVPool(self.model_config, kv_dtype=config.kv_dtype, page_size=config.page_size,
                           budget_bytes=budget, device=config.device)
        self.blocks = BlockManager(self.pool, prefix_cache=config.prefix_cache)
        mc = self.model_config
        self.dense: DenseKV | None = None
        if config.device == "cpu":
            self.dense = DenseKV(mc.num_layers, mc.num_kv_heads, mc.head_dim, self.model.dtype, DENSE_KV_MAX_BYTES)
        self.scheduler = Scheduler(self.blocks, max_num_seqs=config.max_num_seqs,
                                   max_prefill_tokens=config.max_prefill_tokens, max_waiting=config.max_waiting,
                                   admission_timeout_s=config.admission_timeout_s)
        self.metrics = EngineMetrics()
        self.eos_ids = self.tokenizer.eos_ids(self.model_config.eos_token_ids)
        self.max_model_len = self.model_config.max_position_embeddings
        self.served_model_name = config.served_model_name or config.model_path.name
        self._sinks: dict[int, Sink] = {}
        self._by_request: dict[str, Sequence] = {}
        self._inbox: queue.SimpleQueue = queue.SimpleQueue()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pending_faults: list[str] = []

    def _set_threads(self) -> None:
        """Intra-op threads. For small models on CPU one thread is fastest: their matmuls are too small to split, and
        on a shared machine every parallel region waits for a busy core (measured here: 28 ms vs 0.2 ms per linear
        with 2 threads under load). torch's setting is process-wide, hence only when asked or clearly small."""
        if self.config.threads:
            torch.set_num_threads(self.config.threads)
        elif one_intra_op_thread(self.config, self.model):
            torch.set_num_threads(1)

    # ---- public API (any thread) ----------------------------------------------------------------------------
    def submit(self, request_id: str, prompt_ids: list[int], params: SamplingParams, sink: Sink) -> None:
        """Queue a request. Raises RequestRejected for what can be known at once (too long, queue full)."""
        if not prompt_ids:
            raise RequestRejected(400, "invalid_request_error", "the prompt is empty")
        if len(prompt_ids) + params.max_tokens > self.max_model_len:
            raise RequestRejected(
                400, "invalid_request_error",
                f"prompt ({len(prompt_ids)} tokens) + max_tokens ({params.max_tokens}) exceeds the model's context "
                f"length {self.max_model_len}")
        need = self.blocks.pages_needed(len(prompt_ids) + 1)
        if need > self.pool.num_pages:
            raise RequestRejected(
                400, "invalid_request_error",
                f"prompt needs {need} KV pages but the whole pool has {self.pool.num_pages}")
        if bad := [t for t in prompt_ids if not 0 <= t < self.model_config.vocab_size][:1]:
            raise RequestRejected(400, "invalid_request_error", f"token id {bad[0]} is outside the vocabulary")
        if params.forced_tokens is not None and (
                len(params.forced_tokens) != params.max_tokens
                or any(not 0 <= t < self.model_config.vocab_size for t in params.forced_tokens)):
            raise RequestRejected(400, "invalid_request_error",
                                  "forced tokens must be vocabulary ids, as many as max_tokens")
        if len(self.scheduler.waiting) + self._inbox.qsize() >= self.config.max_waiting:
            self.metrics.add(requests_rejected_queue_full=1)
            raise RequestRejected(429, "rate_limit_error", "too many requests are waiting for KV cache space")
        seq = Sequence(list(prompt_ids), params, request_id=request_id)
        if params.temperature > 0:
            seq.generator = torch.Generator()
            seq.generator.manual_seed(params.seed if params.seed is not None else int.from_bytes(
                __import__("os").urandom(8), "little") >> 1)
        self._inbox.put(("add", seq, sink))
        self._wake.set()

    def abort(self, request_id: str, *, finish_reason: str | None = None) -> None:
        """Stop a request. With finish_reason, its sink still gets a FinishEvent with the usage so far (used when the
        server cuts generation at a stop string); without, it just disappears (client went away)."""
        self._inbox.put(("abort", request_id, finish_reason))
        self._wake.set()

    def inject_fault(self, request_id: str) -> None:
        """TEST ONLY: reassign one of this request's live pages to another owner at the next step."""
        if not self.config.allow_fault_injection:
            raise RuntimeError("fault injection is disabled (EngineConfig.allow_fault_injection)")
        self._inbox.put(("fault", request_id, None))
        self._wake.set()

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="reference-engine", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None

    def gauges(self) -> dict[str, float]:
        return {
            "kv_pages_total": self.pool.num_pages,
            "kv_pages_free": self.blocks.num_free,
            "kv_capacity_tokens": self.pool.capacity_tokens,
            "requests_running": len(self.scheduler.running),
            "requests_waiting": len(self.scheduler.waiting),
        }

    # ---- loop -----------------------------------------------------------------------------------------------
    def _loop(self) -> None:
        while not self._stop.is_set():
            self._drain_inbox()
            if not self.scheduler.has_work():
                if self.dense is not None:
                    self.dense.forget_batch()
                woken = self._wake.wait(timeout=IDLE_RELEASE_S)
                self._wake.clear()
                if not woken and self.dense is not None:   # idle a while: the dense K/V buffers' memory goes back
                    self.dense.release()
                continue
            try:
                self.step()
            except Exception as e:  # a bug must not hang every client: fail what is in flight, keep serving
                log.exception("engine step failed")
                for seq in list(self.scheduler.running) + list(self.scheduler.waiting):
                    self._fail(seq, ErrorEvent(500, "server_error", f"engine step failed: {type(e).__name__}: {e}"))

    def _drain_inbox(self) -> None:
        while True:
            try:
                op, arg, sink = self._inbox.get_nowait()
            except queue.Empty:
                return
            if op == "add":
                try:
                    self.scheduler.add(arg)
                except QueueFull as e:
                    self.metrics.add(requests_rejected_queue_full=1)
                    sink(ErrorEvent(429, "rate_limit_error", str(e)))
                    continue
                self._sinks[arg.seq_id] = sink
                self._by_request[arg.request_id] = arg
                self.metrics.add(requests=1)
            elif op == "abort":
                seq = self._by_request.get(arg)
                if seq is not None and seq.status is not SeqStatus.FINISHED:
                    if sink is not None:             # here `sink` carries the finish reason
                        self._finish(seq, sink)
                    else:
                        self.scheduler.remove(seq)
                        self._forget(seq)
                        self.metrics.add(requests_aborted=1)
            elif op == "fault":
                self._pending_faults.append(arg)

    def run_until_idle(self, max_steps: int = 100000) -> None:
        """Synchronous driver for tests and benchmarks (no thread)."""
        for _ in range(max_steps):
            self._drain_inbox()
            if not self.scheduler.has_work():
                if self.dense is not None:
                    self.dense.forget_batch()
                return
            self.step()

    def step(self) -> None:
        self._apply_faults()
        res = self.scheduler.schedule()
        for seq in res.timed_out:
            self.metrics.add(requests_rejected_timeout=1)
            self._emit(seq, ErrorEvent(503, "server_overloaded",
                                       f"no KV cache space became free within {self.config.admission_timeout_s:g}s"))
            self._forget(seq)
        if res.preempted:
            self.metrics.add(preemptions=len(res.preempted))
        for seq in res.exhausted:
            self._finish(seq, "length")
        if res.prefill:
            self._run_prefill(res.prefill)
        if res.decode:
            self._run_decode(res.decode)
        self.metrics.add(steps=1)

    # ---- forward passes -------------------------------------------------------------------------------------
    def _run_prefill(self, seqs: list[Sequence]) -> None:
        dev = self.config.device
        ps = self.pool.page_size
        seqs = self._verify_tags(seqs)
        if not seqs:
            return
        ids: list[int] = []
        pos: list[int] = []
        slots: list[int] = []
        segs: list[PrefillSegment] = []
        for seq in seqs:
            start = len(ids)
            toks = seq.token_ids
            for p in range(seq.num_computed, len(toks)):
                ids.append(toks[p])
                pos.append(p)
                slots.append(seq.block_table[p // ps] * ps + p % ps)
            n_cached_pages = (seq.num_computed + ps - 1) // ps
            segs.append(PrefillSegment(start, len(toks) - seq.num_computed, seq.num_computed,
                                       torch.tensor(seq.block_table[:n_cached_pages], dtype=torch.long, device=dev)))
        meta = AttnMetadata(slot_mapping=torch.tensor(slots, dtype=torch.long, device=dev), prefill=segs)
        self._set_min_rows(seqs)
        hidden = self.model(torch.tensor(ids, device=dev), torch.tensor(pos, device=dev), self.pool, meta, "prefill")
        last_rows = [seg.start + seg.length - 1 for seg in segs]
        logits = self.model.logits(hidden[last_rows], "prefill").cpu()
        for seq, seg in zip(seqs, segs):
            if seq.preempted == 0 and (seq.params.prompt_logprobs is not None
                                       or seq.params.full_distribution_from is not None):
                self._emit_prompt_logprobs(seq, hidden[seg.start: seg.start + seg.length])
            first_time = seq.preempted == 0
            seq.num_computed = len(seq)
            self.blocks.register_full_pages(seq)
            if first_time:
                self.metrics.add(prompt_tokens=len(seq.prompt_ids), prefix_cached_tokens=seq.num_cached_tokens)
        keep = [(i, s) for i, s in enumerate(seqs) if s.status is SeqStatus.RUNNING]
        to_sample = [s for _, s in keep if s.params.max_tokens > 0]
        for seq in [s for _, s in keep if s.params.max_tokens == 0]:
            self._finish(seq, "length")
        if to_sample:
            rows = [i for i, s in keep if s.params.max_tokens > 0]
            self._accept(to_sample, force_choices(logits[rows], to_sample, sample(logits[rows], to_sample)))

    def _run_decode(self, seqs: list[Sequence]) -> None:
        dev = self.config.device
        ps = self.pool.page_size
        lens = [len(s) for s in seqs]                 # tokens including the one this step feeds
        ids = [s.output_ids[-1] if s.output_ids else s.prompt_ids[-1] for s in seqs]
        pos = [n - 1 for n in lens]
        slots = [s.block_table[p // ps] * ps + p % ps for s, p in zip(seqs, pos)]
        bt, et = self.blocks.tag_tensors(seqs, dev)
        meta = AttnMetadata(slot_mapping=torch.tensor(slots, dtype=torch.long, device=dev), block_tables=bt,
                            seq_lens=torch.tensor(lens, dtype=torch.int32, device=dev),
                            expected_tags=et, check_tags=self.config.check_page_tags)
        # a sequence preempted and admitted again is a new row (its pages were recomputed): the key says so
        if self.dense is not None and self.dense.begin_step(tuple((s.seq_id, s.preempted) for s in seqs),
                                                            bt.shape[1] * ps):
            meta.dense = self.dense
        self._set_min_rows(seqs)
        hidden = self.model(torch.tensor(ids, device=dev), torch.tensor(pos, device=dev), self.pool, meta, "decode")
        if meta.dense is not None:
            meta.dense.finish_step()
        logits = self.model.logits(hidden, "decode").cpu()
        for s, n in zip(seqs, lens):
            s.num_computed = n
            if n % ps == 0:
                # a page just filled with generated tokens: publish it, so the next turn of a conversation (whose
                # prompt repeats this reply) can reuse it
                self.blocks.register_full_pages(s)
        if self.config.check_page_tags:
            self.metrics.add(kv_tag_checks=len(seqs))
            bad = meta.tag_mismatch.cpu().tolist() if meta.tag_mismatch is not None else [False] * len(seqs)
        else:
            bad = [False] * len(seqs)
        if any(bad):
            for i, b in enumerate(bad):
                if b:
                    self._integrity_failure(seqs[i])
            ok_rows = [i for i, b in enumerate(bad) if not b]
            seqs, logits = [seqs[i] for i in ok_rows], logits[ok_rows]
        if seqs:
            self._accept(seqs, force_choices(logits, seqs, sample(logits, seqs)))

    def _set_min_rows(self, seqs: list[Sequence]) -> None:
        """A step that holds a measured request (logprobs, distributions, forced tokens) computes its linears on at
        least BATCH_INVARIANT_ROWS rows, so that request's numbers are the same bits whatever else shares the step
        (the exact KL must not depend on load or timing); other steps keep the one-row speed."""
        p = [s.params for s in seqs]
        measured = any(x.logprobs or x.forced_tokens is not None or x.full_distribution_from is not None
                       or x.prompt_logprobs is not None for x in p)
        self.model.min_rows.rows = BATCH_INVARIANT_ROWS if measured else 1

    def _verify_tags(self, seqs: list[Sequence]) -> list[Sequence]:
        """Prefill reads cached prefix pages: verify (page, tag) before the forward pass, like decode does."""
        if not self.config.check_page_tags:
            return seqs
        bt, et = self.blocks.tag_tensors(seqs, self.config.device)
        bad = kernels.check_tags(self.pool.page_tags, bt, et).cpu().tolist()
        self.metrics.add(kv_tag_checks=len(seqs))
        good = []
        for seq, b in zip(seqs, bad):
            if b:
                self._integrity_failure(seq)
            else:
                good.append(seq)
        return good

    def _integrity_failure(self, seq: Sequence) -> None:
        self.metrics.add(kv_tag_failures=1)
        log.error("kv integrity check failed for request %s: a page it holds was reassigned", seq.request_id)
        self._fail(seq, ErrorEvent(500, "kv_integrity_error",
                                   "KV cache integrity check failed: a page of this request was reassigned; "
                                   "the request was aborted before reading it", "kv_integrity_error"))

    def _emit_prompt_logprobs(self, seq: Sequence, hidden_rows: torch.Tensor) -> None:
        logits = self.model.logits(hidden_rows, "prefill")
        lp = torch.log_softmax(logits.float(), dim=-1).cpu()     # row r predicts token r+1
        toks = seq.prompt_ids
        if seq.params.full_distribution_from is not None:
            start = seq.params.full_distribution_from
            self._emit(seq, DistributionEvent(lp[start - 1: len(toks) - 1].contiguous()))
        if seq.params.prompt_logprobs is not None:
            k = seq.params.prompt_logprobs
            chosen: list[float | None] = [None]
            top: list[list[tuple[int, float]] | None] = [None]
            if len(toks) > 1:
                nxt = torch.tensor(toks[1:])
                chosen += lp[:-1].gather(1, nxt[:, None])[:, 0].tolist()
                if k > 0:
                    vals, idx = lp[:-1].topk(k, dim=-1)
                    top += [list(zip(i, v)) for i, v in zip(idx.tolist(), vals.tolist())]
                else:
                    top += [[] for _ in toks[1:]]
            self._emit(seq, PromptLogprobsEvent(list(toks), chosen, top))

    def _accept(self, seqs: list[Sequence], choices: list[TokenChoice]) -> None:
        self.metrics.add(generation_tokens=len(seqs))
        for seq, ch in zip(seqs, choices):
            seq.output_ids.append(ch.token_id)
            self._emit(seq, TokenEvent(ch))
            p = seq.params
            if (not p.ignore_eos and ch.token_id in self.eos_ids) or ch.token_id in p.stop_token_ids:
                self._finish(seq, "stop")
            elif len(seq.output_ids) >= p.max_tokens or len(seq) >= self.max_model_len:
                self._finish(seq, "length")

    # ---- bookkeeping ----------------------------------------------------------------------------------------
    def _finish(self, seq: Sequence, reason: str) -> None:
        self.scheduler.remove(seq)
        self.metrics.add(requests_finished=1)
        rows = forced_rows(seq)
        if rows is not None:
            self._emit(seq, DistributionEvent(rows))
        self._emit(seq, FinishEvent(reason, len(seq.prompt_ids), len(seq.output_ids), seq.num_cached_tokens))
        self._forget(seq)

    def _fail(self, seq: Sequence, err: ErrorEvent) -> None:
        self.scheduler.remove(seq)
        self._emit(seq, err)
        self._forget(seq)

    def _emit(self, seq: Sequence, ev: Event) -> None:
        sink = self._sinks.get(seq.seq_id)
        if sink is not None:
            try:
                sink(ev)
            except Exception:  # a vanished client must not stop the engine
                log.debug("sink for %s failed", seq.request_id, exc_info=True)

    def _forget(self, seq: Sequence) -> None:
        self._sinks.pop(seq.seq_id, None)
        if self._by_request.get(seq.request_id) is seq:
            del self._by_request[seq.request_id]

    def _apply_faults(self) -> None:
        pending, self._pending_faults = self._pending_faults, []
        for rid in pending:
            seq = self._by_request.get(rid)
            if seq is None or seq.status is SeqStatus.FINISHED:
                continue                              # gone: nothing to corrupt
            if seq.status is not SeqStatus.RUNNING or not seq.block_table:
                self._pending_faults.append(rid)      # not admitted yet: try again next step
                continue
            if self.blocks.inject_fault(seq) is not None:
                self.metrics.add(kv_faults_injected=1)
