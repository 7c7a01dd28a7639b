"""INT4 weight-only, group-wise quantisation (the format in docs/CONTRACTS.md).

Why group-wise: one scale per 128 input channels keeps the error of an outlier local to its group, and the scale costs
only 2 bytes per 64 packed bytes, which is how an INT4 checkpoint stays under 0.28x of bf16. Symmetric by default
(q = clamp(round(w / s), -8, 7), s = amax / 7); the asymmetric option spends one more nibble-range value per group.

Stored layout (shared with the Triton kernels): `qweight` uint8 [N, K // 2], element 2j in the low nibble and 2j+1 in
the high nibble, each nibble = q + 8; `scales` [N, K // G]; `zeros` [N, K // G] or None.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class Int4Weight:
    qweight: torch.Tensor                 # uint8 [N, K // 2]
    scales: torch.Tensor                  # [N, K // G]
    zeros: torch.Tensor | None            # [N, K // G] (asymmetric) or None
    group_size: int
    in_features: int
    out_features: int
    # backend-private cached layouts (e.g. aten's CPU int4pack); never part of the exchange format
    cache: dict = field(default_factory=dict, repr=False, compare=False)

    def nbytes(self) -> int:
        """Bytes of the exchange format (packed weights + scales + zeros), the figure compared with bf16."""
        n = self.qweight.numel() * self.qweight.element_size() + self.scales.numel() * self.scales.element_size()
        if self.zeros is not None:
            n += self.zeros.numel() * self.zeros.element_size()
        return n


def quantize_int4(
    w: torch.Tensor, group_size: int = 128, *, asymmetric: bool = False, scale_dtype: torch.dtype = torch.bfloat16
) -> Int4Weight:
    """Round-to-nearest INT4 quantisation of a [N, K] weight. K must be a multiple of group_size."""
    if w.dim() != 2:
        raise ValueError(f"int4 quantisation needs a 2-D weight, got shape {tuple(w.shape)}")
    n, k = w.shape
    if k % group_size or k % 2:
        raise ValueError(f"in_features {k} is not a multiple of the int4 group size {group_size}")
    wg = w.float().reshape(n, k // group_size, group_size)
    if asymmetric:
        lo, hi = wg.amin(-1), wg.amax(-1)
        s = ((hi - lo) / 15).clamp(min=1e-10)
        s = s.to(scale_dtype).float()
        zero = torch.clamp(torch.round(-lo / s), 0, 15)
        q = torch.clamp(torch.round(wg / s[..., None]) + zero[..., None], 0, 15)
        nib = q.to(torch.uint8)
        zeros = zero.to(scale_dtype)
    else:
        s = (wg.abs().amax(-1) / 7).clamp(min=1e-10)
        s = s.to(scale_dtype).float()          # quantise against the scale actually stored
        q = torch.clamp(torch.round(wg / s[..., None]), -8, 7)
        nib = (q + 8).to(torch.uint8)
        zeros = None
    nib = nib.reshape(n, k)
    packed = (nib[:, 0::2] | (nib[:, 1::2] << 4)).contiguous()
    return Int4Weight(packed, s.to(scale_dtype).contiguous(), zeros, group_size, k, n)


def unpack_nibbles(qweight: torch.Tensor) -> torch.Tensor:
    """uint8 [N, K/2] -> uint8 [N, K] of nibble values 0..15."""
    lo = qweight & 0x0F
    hi = qweight >> 4
    return torch.stack([lo, hi], dim=-1).reshape(qweight.shape[0], -1)


def dequantize_int4(p: Int4Weight, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Exact inverse of the stored format: the weight every backend must reproduce."""
    nib = unpack_nibbles(p.qweight).float().reshape(p.out_features, -1, p.group_size)
    s = p.scales.float()[..., None]
    if p.zeros is None:
        w = (nib - 8) * s
    else:
        w = (nib - p.zeros.float()[..., None]) * s
    return w.reshape(p.out_features, p.in_features).to(dtype)


def weight_bytes(module: torch.nn.Module) -> int:
    """Bytes of a module's weights: dense parameters plus Int4Weight attributes (buffers such as RoPE tables
    excluded)."""
    total = 0
    seen: set[int] = set()
    for t in module.parameters():
        if id(t) not in seen:
            seen.add(id(t))
            total += t.numel() * t.element_size()
    for m in module.modules():
        for v in vars(m).values():
            if isinstance(v, Int4Weight):
                total += v.nbytes()
    return total
