"""Continuous batching with admission control.

Each engine step admits waiting requests FIFO while their pages fit (prefill), and advances every running request by
one token (decode), so requests join and leave the batch between steps. When the pool is full a new request waits; one
that waits longer than `admission_timeout_s` is rejected (503), and a queue longer than `max_waiting` rejects at once
(429). A running request that needs a page when none is free preempts the most recently admitted one, whose pages are
freed and which is recomputed later (so a full pool slows requests down instead of failing them).
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

from reference_engine.block_manager import BlockManager
from reference_engine.sequence import SeqStatus, Sequence


class QueueFull(RuntimeError):
    """More requests are queued than `max_waiting`: answer 429."""


@dataclass
class ScheduleResult:
    prefill: list[Sequence] = field(default_factory=list)
    decode: list[Sequence] = field(default_factory=list)
    timed_out: list[Sequence] = field(default_factory=list)   # answer 503
    preempted: list[Sequence] = field(default_factory=list)
    exhausted: list[Sequence] = field(default_factory=list)   # outgrew the whole pool: finish with "length"


class Scheduler:
    def __init__(self, blocks: BlockManager, *, max_num_seqs: int, max_prefill_tokens: int, max_waiting: int,
                 admission_timeout_s: float) -> None:
        self.blocks = blocks
        self.max_num_seqs = max_num_seqs
        self.max_prefill_tokens = max_prefill_tokens
        self.max_waiting = max_waiting
        self.admission_timeout_s = admission_timeout_s
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []

    def add(self, seq: Sequence) -> None:
        if len(self.waiting) >= self.max_waiting:
            raise QueueFull(f"{len(self.waiting)} requests already waiting for KV cache space")
        seq.arrival = time.monotonic()
        seq.status = SeqStatus.WAITING
        self.waiting.append(seq)

    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    def remove(self, seq: Sequence) -> None:
        """Drop a request wherever it is and free its pages (finish, abort, integrity failure)."""
        if seq in self.running:
            self.running.remove(seq)
        elif seq in self.waiting:
            self.waiting.remove(seq)
        if seq.block_table:
            self.blocks.free_seq(seq)
        seq.status = SeqStatus.FINISHED

    def schedule(self) -> ScheduleResult:
        res = ScheduleResult()
        now = time.monotonic()
        # 1. admit (prefill) in arrival order while pages, batch slots and the token budget allow
        budget = self.max_prefill_tokens
        memory_blocked = False
        page = self.blocks.page_size
        # pages the running requests need for their next token (those exactly at a page boundary)
        reserve = sum(1 for s in self.running if len(s) > len(s.block_table) * page)
        while self.waiting and len(self.running) + len(res.prefill) < self.max_num_seqs:
            seq = self.waiting[0]
            n_new = len(seq)
            if res.prefill and n_new > budget:
                break
            if not self.blocks.can_allocate(seq, reserve=reserve + len(res.prefill)):
                memory_blocked = True
                break
            self.waiting.popleft()
            self.blocks.allocate(seq)
            budget -= len(seq) - seq.num_computed
            seq.status = SeqStatus.RUNNING
            res.prefill.append(seq)
        # 2. bounded wait: while the KV pool is what holds the queue back, requests that have waited too long are
        #    turned away (503) instead of queueing without end; waiting for a batch slot alone never times out
        if memory_blocked:
            for seq in list(self.waiting):
                if seq.preempted == 0 and now - seq.arrival > self.admission_timeout_s:
                    self.waiting.remove(seq)
                    seq.status = SeqStatus.FINISHED
                    res.timed_out.append(seq)
        # 3. decode every running request; make room by preempting the newest when the pool is full
        decode: list[Sequence] = []
        queue = list(self.running)
        while queue:
            seq = queue.pop(0)
            while not self.blocks.can_append(seq):
                victim = queue.pop() if queue else None
                if victim is None:
                    victim = seq
                    if self.blocks.pages_needed(len(seq)) > self.blocks.pool.num_pages:
                        # it would not fit even alone: recomputing it later could never succeed
                        self.running.remove(seq)
                        res.exhausted.append(seq)
                        break
                self._preempt(victim)
                res.preempted.append(victim)
                if victim is seq:
                    break
            else:
                self.blocks.append_slot(seq)
                decode.append(seq)
        res.decode = decode
        self.running = [s for s in self.running if s.status is SeqStatus.RUNNING] + res.prefill
        return res

    def _preempt(self, seq: Sequence) -> None:
        self.blocks.free_seq(seq)
        seq.status = SeqStatus.WAITING
        seq.preempted += 1
        self.waiting.appendleft(seq)
