"""Small pure-PyTorch references for the kernel tests, written independently of the kernels and of the engine's
``torch_ops`` (which the tests also compare against when it exists), for the layouts in docs/CONTRACTS.md.

They favour obviousness over speed: Python loops over sequences, pages and tokens, float32 arithmetic throughout.
"""
from __future__ import annotations

import torch

FP8_MAX = 448.0


def attention(q, k_pages, v_pages, k_scales, v_scales, block_tables, seq_lens, page_tags, expected_tags, scale):
    """Per sequence: gather its pages, dequantise, GQA-expand, softmax(q k^T * scale) v; plus the tag verdict."""
    B, H, D = q.shape
    _, S, Hkv, _ = k_pages.shape
    group = H // Hkv
    out = torch.zeros(B, H, D, dtype=torch.float32)
    bad = torch.zeros(B, dtype=torch.bool)
    for b in range(B):
        n = int(seq_lens[b])
        npages = -(-n // S)
        pages = block_tables[b, :npages].long().cpu()
        valid = (pages >= 0) & (pages < k_pages.shape[0])
        tags = page_tags.cpu()[pages.clamp(min=0)]
        tags_ok = bool(valid.all()) and bool((tags == expected_tags[b, :npages].cpu()).all())
        bad[b] = not tags_ok
        if not bool(valid.all()):
            continue
        k = k_pages.cpu()[pages].float()
        v = v_pages.cpu()[pages].float()
        if k_scales is not None:
            k = k * k_scales.cpu()[pages][:, None, :, None]
            v = v * v_scales.cpu()[pages][:, None, :, None]
        k = k.reshape(npages * S, Hkv, D)[:n].repeat_interleave(group, dim=1)  # [n, H, D]
        v = v.reshape(npages * S, Hkv, D)[:n].repeat_interleave(group, dim=1)
        s = torch.einsum("hd,nhd->hn", q[b].float().cpu(), k) * scale
        out[b] = torch.einsum("hn,nhd->hd", torch.softmax(s, dim=-1), v)
    return out, bad


def write_kv(k, v, k_pages, v_pages, k_scales, v_scales, slot_mapping):
    """Contract rule applied to runs of consecutive tokens sharing a page: a run starting at offset 0 sets a fresh
    scale; otherwise the scale grows to cover the new tokens and the old entries are requantised to it."""
    T, Hkv, D = k.shape
    S = k_pages.shape[1]
    slots = [int(s) for s in slot_mapping]
    t = 0
    while t < T:
        if slots[t] < 0:
            t += 1
            continue
        page = slots[t] // S
        run = [t]
        while t + len(run) < T and slots[t + len(run)] >= 0 and slots[t + len(run)] // S == page and len(run) < S:
            run.append(t + len(run))
        offs = [slots[i] % S for i in run]
        for src, pages, scales in ((k, k_pages, k_scales), (v, v_pages, v_scales)):
            if scales is None:
                for i, o in zip(run, offs):
                    pages[page, o] = src[i].to(pages.dtype)
                continue
            x = src[run].float()  # [r, Hkv, D]
            o_min = min(offs)
            for h in range(Hkv):
                old = scales[page, h].clone()  # float32 0-d tensors: same arithmetic as the kernel
                base = old if o_min > 0 else torch.zeros((), dtype=torch.float32)
                new = torch.maximum(base, x[:, h].abs().max() / FP8_MAX)
                safe = new if bool(new > 0) else torch.ones((), dtype=torch.float32)
                if o_min > 0 and bool(new > old):
                    kept = pages[page, :o_min, h].float() * (old / safe)
                    pages[page, :o_min, h] = kept.clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
                for j, o in enumerate(offs):
                    pages[page, o, h] = (x[j, h] / safe).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
                scales[page, h] = new
        t += len(run)


def dequant_int4(p) -> torch.Tensor:
    """Unpack to float32 ``[N, K]`` straight from the layout definition."""
    qw = p.qweight.cpu()
    N = qw.shape[0]
    nib = torch.stack([qw & 15, qw >> 4], dim=-1).reshape(N, -1).float()
    g = nib.reshape(N, -1, p.group_size)
    s = p.scales.cpu().float()[..., None]
    if p.zeros is None:
        w = (g - 8) * s
    else:
        w = (g - p.zeros.cpu().float()[..., None]) * s
    return w.reshape(N, -1)
