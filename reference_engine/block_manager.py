"""Page allocation: reference counts, prefix caching by a hash chain over full pages, and page tags.

Page tags are the integrity check against the allocator itself: every time a page is handed to a new owner it gets a
fresh tag (a pool-wide counter), the owner records (page, tag), and attention refuses to read a page whose tag moved.
Sharing a cached prefix page is not a reassignment (its contents are unchanged), so sharers keep the page's tag.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict

import torch

from reference_engine.kv_cache import KVPool
from reference_engine.sequence import Sequence


def page_hash(parent: bytes, tokens: list[int]) -> bytes:
    """Hash of a full page given its parent's hash: equal hashes mean equal whole prefixes, not just equal pages."""
    h = hashlib.blake2b(parent, digest_size=16)
    h.update(b"".join(t.to_bytes(4, "little", signed=False) for t in tokens))
    return h.digest()


class BlockManager:
    def __init__(self, pool: KVPool, *, prefix_cache: bool = True) -> None:
        self.pool = pool
        self.page_size = pool.page_size
        self.prefix_cache = prefix_cache
        n = pool.num_pages
        self.ref = [0] * n
        self.page_hash: list[bytes | None] = [None] * n
        self.page_tokens: list[tuple[int, ...] | None] = [None] * n
        self.cached: dict[bytes, int] = {}             # hash -> page (full pages, live or evictable)
        self.free: OrderedDict[int, None] = OrderedDict((i, None) for i in range(n))  # LRU: oldest first
        self._next_tag = 1
        self._tags_cpu = [0] * n                       # mirror of pool.page_tags, avoids device reads
        self.faults_injected = 0

    # ---- capacity -------------------------------------------------------------------------------------------
    @property
    def num_free(self) -> int:
        return len(self.free)

    def pages_needed(self, n_tokens: int) -> int:
        return (n_tokens + self.page_size - 1) // self.page_size

    def can_allocate(self, seq: Sequence, reserve: int = 0) -> bool:
        """Room for seq's pages while keeping `reserve` pages free (one per running request about to decode)."""
        hits = self._prefix_hits(seq) if self._use_cache(seq) else []
        evictable_hits = sum(1 for p in hits if self.ref[p] == 0)   # hits sitting in the free list
        return self.pages_needed(len(seq)) - len(hits) + evictable_hits + reserve <= self.num_free

    def can_append(self, seq: Sequence) -> bool:
        return len(seq.block_table) * self.page_size >= len(seq) or self.num_free > 0

    # ---- allocation -----------------------------------------------------------------------------------------
    def _use_cache(self, seq: Sequence) -> bool:
        return self.prefix_cache and seq.params.prompt_logprobs is None and seq.params.full_distribution_from is None

    def _prefix_hits(self, seq: Sequence) -> list[int]:
        """Pages of the longest cached prefix; at least one token is always left to compute (its logits are needed)."""
        tokens = seq.token_ids
        max_pages = (len(tokens) - 1) // self.page_size
        hits: list[int] = []
        parent = b""
        for i in range(max_pages):
            chunk = tokens[i * self.page_size:(i + 1) * self.page_size]
            h = page_hash(parent, chunk)
            page = self.cached.get(h)
            if page is None or self.page_tokens[page] != tuple(chunk):
                break
            hits.append(page)
            parent = h
        return hits

    def _fresh_page(self) -> int:
        page, _ = self.free.popitem(last=False)
        old = self.page_hash[page]
        if old is not None and self.cached.get(old) == page:
            del self.cached[old]
        self.page_hash[page] = None
        self.page_tokens[page] = None
        self.ref[page] = 1
        tag = self._next_tag
        self._next_tag += 1
        self._tags_cpu[page] = tag
        self.pool.page_tags[page] = tag
        self.pool.reset_scales([page])
        return page

    def allocate(self, seq: Sequence) -> None:
        """Pages for all of seq's current tokens; sets seq.num_cached_tokens / num_computed from prefix hits."""
        assert not seq.block_table
        hits = self._prefix_hits(seq) if self._use_cache(seq) else []
        for page in hits:
            if self.ref[page] == 0:
                self.free.pop(page, None)
            self.ref[page] += 1
            seq.block_table.append(page)
            seq.expected_tags.append(self._tags_cpu[page])
        seq.num_cached_tokens = len(hits) * self.page_size
        seq.num_computed = seq.num_cached_tokens
        for _ in range(self.pages_needed(len(seq)) - len(hits)):
            page = self._fresh_page()
            seq.block_table.append(page)
            seq.expected_tags.append(self._tags_cpu[page])

    def append_slot(self, seq: Sequence) -> None:
        """Make room for one more token (called before a decode step)."""
        if len(seq.block_table) * self.page_size < len(seq):
            page = self._fresh_page()
            seq.block_table.append(page)
            seq.expected_tags.append(self._tags_cpu[page])

    def register_full_pages(self, seq: Sequence) -> None:
        """After K/V of seq's tokens are written: publish its full pages in the prefix cache."""
        if not self._use_cache(seq):
            return
        tokens = seq.token_ids[:seq.num_computed]
        parent = b""
        for i in range(len(tokens) // self.page_size):
            page = seq.block_table[i]
            chunk = tokens[i * self.page_size:(i + 1) * self.page_size]
            h = self.page_hash[page]
            if h is None:
                h = page_hash(parent, chunk)
                if self._tags_cpu[page] != seq.expected_tags[i]:
                    break                                  # never publish a page we no longer own
                self.page_hash[page] = h
                self.page_tokens[page] = tuple(chunk)
                self.cached.setdefault(h, page)
            parent = h

    def free_seq(self, seq: Sequence) -> None:
        for page, tag in zip(reversed(seq.block_table), reversed(seq.expected_tags)):
            if self._tags_cpu[page] != tag:
                # reassigned under us (injected fault): the page is someone else's now. The phantom owner of an
                # injected fault returns it here, so the pool does not leak.
                if self.ref[page] > 0:
                    self.ref[page] = 0
                    self.free[page] = None
                continue
            self.ref[page] -= 1
            if self.ref[page] == 0:
                self.free[page] = None
        seq.block_table.clear()
        seq.expected_tags.clear()
        seq.num_computed = 0

    # ---- tags -----------------------------------------------------------------------------------------------
    def tag_tensors(self, seqs: list[Sequence], device) -> tuple[torch.Tensor, torch.Tensor]:
        """block_tables [B, P] int32 (-1 padded) and expected_tags [B, P] int64 for a batch."""
        width = max(len(s.block_table) for s in seqs)
        bt = [s.block_table + [-1] * (width - len(s.block_table)) for s in seqs]
        et = [s.expected_tags + [0] * (width - len(s.expected_tags)) for s in seqs]
        return (torch.tensor(bt, dtype=torch.int32, device=device), torch.tensor(et, dtype=torch.int64, device=device))

    def inject_fault(self, victim: Sequence) -> int | None:
        """TEST ONLY: simulate an allocator bug that hands one of victim's live pages to another owner.

        The page gets a new tag (as every reassignment does) and its contents are overwritten, as the new owner's
        writes would. Only pages victim alone holds are chosen, so no innocent sharer is hit. Returns the page.
        """
        for page in reversed(seq_pages := list(victim.block_table)):
            if self.ref[page] == 1:
                break
        else:
            return None
        del seq_pages
        tag = self._next_tag
        self._next_tag += 1
        self._tags_cpu[page] = tag
        self.pool.page_tags[page] = tag
        for t in self.pool.k_pages + self.pool.v_pages:
            t[page] = torch.randn(t[page].shape).to(t.dtype)
        old = self.page_hash[page]
        if old is not None and self.cached.get(old) == page:
            del self.cached[old]
        self.page_hash[page] = None
        self.page_tokens[page] = None
        self.faults_injected += 1
        return page
