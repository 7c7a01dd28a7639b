"""The paged KV pool: per layer K and V pages, FP8 scales, and one pool-wide tensor of page tags.

Sizing is by bytes, not tokens, because memory is what a provider actually budgets; the FP8 pool therefore holds about
twice the tokens of a bf16 pool at the same budget (the scales cost 2 x 4 bytes per page-head, i.e. ~0.4% at page 16).

Why per-page-per-head FP8 scales (and not one per-tensor scale): K/V magnitudes differ by head by an order of magnitude
or more (RoPE'd keys have outlier channels in a few heads). A single dynamic per-tensor scale would be set by the
largest
head and crush the small ones into e4m3's subnormal range; a scale of 1.0 would overflow or waste most of the range. A
scale per (page, head) tracks each head locally, needs no calibration pass, and costs little: when a new token raises a
partially filled page-head's amax, that page-head (at most page_size tokens) is requantised to the larger scale.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from reference_engine.config import ModelConfig

_TORCH_DTYPES = {
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
    "fp32": torch.float32,
    "fp8": torch.float8_e4m3fn,
}


def kv_torch_dtype(name: str) -> torch.dtype:
    return _TORCH_DTYPES[name]


def bytes_per_page(cfg: ModelConfig, kv_dtype: str, page_size: int) -> int:
    """K+V bytes of one page across all layers, plus its scales (fp8) and its tag."""
    elem = torch.empty((), dtype=kv_torch_dtype(kv_dtype)).element_size()
    per_layer = 2 * page_size * cfg.num_kv_heads * cfg.head_dim * elem
    if kv_dtype == "fp8":
        per_layer += 2 * cfg.num_kv_heads * 4
    return per_layer * cfg.num_layers + 8


@dataclass
class PoolInfo:
    kv_dtype: str
    page_size: int
    num_pages: int
    capacity_tokens: int
    bytes: int


class KVPool:
    """Physical storage only; who owns which page is the block manager's business."""

    def __init__(self, cfg: ModelConfig, *, kv_dtype: str, page_size: int, budget_bytes: int,
                 device: str | torch.device = "cpu") -> None:
        per_page = bytes_per_page(cfg, kv_dtype, page_size)
        self.num_pages = int(budget_bytes // per_page)
        if self.num_pages < 1:
            raise ValueError(f"KV budget of {budget_bytes} bytes is smaller than one page ({per_page} bytes)")
        self.kv_dtype = kv_dtype
        self.page_size = page_size
        self.dtype = kv_torch_dtype(kv_dtype)
        self.bytes_per_page = per_page
        shape = (self.num_pages, page_size, cfg.num_kv_heads, cfg.head_dim)
        self.k_pages = [torch.zeros(shape, dtype=self.dtype, device=device) for _ in range(cfg.num_layers)]
        self.v_pages = [torch.zeros(shape, dtype=self.dtype, device=device) for _ in range(cfg.num_layers)]
        if kv_dtype == "fp8":
            sshape = (self.num_pages, cfg.num_kv_heads)
            self.k_scales: list[torch.Tensor] | None = [torch.zeros(sshape, dtype=torch.float32, device=device)
                                                        for _ in range(cfg.num_layers)]
            self.v_scales: list[torch.Tensor] | None = [torch.zeros(sshape, dtype=torch.float32, device=device)
                                                        for _ in range(cfg.num_layers)]
        else:
            self.k_scales = self.v_scales = None
        self.page_tags = torch.zeros(self.num_pages, dtype=torch.int64, device=device)

    def layer(self, i: int):
        ks = self.k_scales[i] if self.k_scales is not None else None
        vs = self.v_scales[i] if self.v_scales is not None else None
        return self.k_pages[i], self.v_pages[i], ks, vs

    def reset_scales(self, pages: list[int]) -> None:
        """A page handed to a new owner starts from scale 0, so its previous owner's amax cannot inflate it."""
        if self.k_scales is None or self.v_scales is None or not pages:  # both exist exactly for FP8 pages
            return
        idx = torch.tensor(pages, dtype=torch.long, device=self.page_tags.device)
        for s in self.k_scales + self.v_scales:
            s[idx] = 0.0

    @property
    def capacity_tokens(self) -> int:
        return self.num_pages * self.page_size

    def info(self) -> PoolInfo:
        return PoolInfo(self.kv_dtype, self.page_size, self.num_pages, self.capacity_tokens,
                        self.num_pages * self.bytes_per_page)
