"""Random paged KV pools for the kernel tests: shuffled physical pages, -1 padded block tables, random page tags."""
from __future__ import annotations

from dataclasses import dataclass

import torch
from kernel_ref import FP8_MAX


@dataclass
class Pool:
    q: torch.Tensor
    k_pages: torch.Tensor
    v_pages: torch.Tensor
    k_scales: torch.Tensor | None
    v_scales: torch.Tensor | None
    block_tables: torch.Tensor
    seq_lens: torch.Tensor
    page_tags: torch.Tensor
    expected_tags: torch.Tensor

    def args(self, scale: float) -> tuple:
        return (self.q, self.k_pages, self.v_pages, self.k_scales, self.v_scales, self.block_tables, self.seq_lens,
                self.page_tags, self.expected_tags, scale)


def _quantise_pages(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per page-head amax/448 scales, as a freshly filled pool would hold."""
    s = (x.abs().amax(dim=(1, 3)) / FP8_MAX).clamp(min=1e-12)  # [P, Hkv]
    q = (x / s[:, None, :, None]).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q, s.float().contiguous()


def make_pool(seq_lens: list[int], *, num_heads: int, num_kv_heads: int, head_dim: int, page_size: int,
              kv_dtype: str, device: torch.device, seed: int, spare_pages: int = 3, extra_table: int = 1) -> Pool:
    g = torch.Generator().manual_seed(seed)
    B = len(seq_lens)
    pages_per = [-(-n // page_size) for n in seq_lens]
    num_pages = sum(pages_per) + spare_pages
    max_pages = max(pages_per) + extra_table
    perm = torch.randperm(num_pages, generator=g)
    block_tables = torch.full((B, max_pages), -1, dtype=torch.int32)
    pos = 0
    for b, n in enumerate(pages_per):
        block_tables[b, :n] = perm[pos:pos + n].int()
        pos += n
    page_tags = torch.randint(1, 2**40, (num_pages,), generator=g, dtype=torch.int64)
    expected = torch.zeros(B, max_pages, dtype=torch.int64)
    for b, n in enumerate(pages_per):
        expected[b, :n] = page_tags[block_tables[b, :n].long()]
    shape = (num_pages, page_size, num_kv_heads, head_dim)
    k = torch.randn(shape, generator=g) * 2.0
    v = torch.randn(shape, generator=g)
    q = torch.randn(B, num_heads, head_dim, generator=g)
    if kv_dtype == "fp8":
        k_pages, k_scales = _quantise_pages(k)
        v_pages, v_scales = _quantise_pages(v)
    else:
        k_pages, v_pages, k_scales, v_scales = k.bfloat16(), v.bfloat16(), None, None
    mv = lambda t: None if t is None else t.to(device)  # noqa: E731
    return Pool(q.bfloat16().to(device), mv(k_pages), mv(v_pages), mv(k_scales), mv(v_scales), mv(block_tables),
                torch.tensor(seq_lens, dtype=torch.int32, device=device), mv(page_tags), mv(expected))
