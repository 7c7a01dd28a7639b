"""Turn endpoint logprob payloads into aligned top-k arrays for the estimator.

Three wire formats are read into one :class:`TokenTrack` (a list of positions, each with the actual
token, its logprob and the top-k alternatives):

* chat completions: ``choices[0].logprobs.content[i] = {token, logprob, bytes, top_logprobs: [...]}``;
* legacy completions (``echo`` + ``logprobs``): ``tokens``, ``token_logprobs``, ``top_logprobs`` (dicts
  token -> logprob), ``text_offset``;
* vLLM ``prompt_logprobs``: a list (first entry null) of dicts ``token_id -> {logprob, rank, decoded_token}``.

Tokens are compared by their byte strings where the endpoint gives ``bytes``, else by their text.
Alignment pairs positions whose token starts at the same character offset of the shared text *and*
has the same string on both sides; anything else is counted as misaligned and excluded, never paired
silently. Token strings become integer ids through one :class:`Interner` shared by both sides.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from verifier.kinds.logprob.estimator import TopK


class LogprobFormatError(ValueError):
    """A logprob payload that does not have the shape its method promises (one line, names the field)."""


@dataclass
class Position:
    token: str
    logprob: float | None  # of the actual token; None when the endpoint gave none (first prompt token)
    top: dict[str, float]  # alternatives: token string -> logprob (duplicates merged)
    offset: int = 0  # character offset of the token in the track's text


@dataclass
class TokenTrack:
    positions: list[Position] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(p.token for p in self.positions)


class Interner:
    """Token string -> small int id, shared by the tracks being compared."""

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}

    def __call__(self, token: str) -> int:
        return self._ids.setdefault(token, len(self._ids))


def _key(token: Any, raw_bytes: Any) -> str:
    if isinstance(raw_bytes, list) and raw_bytes and all(isinstance(b, int) and 0 <= b < 256 for b in raw_bytes):
        try:
            return bytes(raw_bytes).decode("utf-8")
        except UnicodeDecodeError:
            return "<0x" + bytes(raw_bytes).hex() + ">"
    if not isinstance(token, str):
        raise LogprobFormatError(f"token {token!r} is not a string")
    return token


def _merge(top: dict[str, float], token: str, lp: float) -> None:
    """Two entries with one string (e.g. byte tokens that decode alike) are one token to us: add their mass."""
    if token in top:
        a, b = top[token], lp
        m = max(a, b)
        top[token] = m + math.log(math.exp(a - m) + math.exp(b - m))
    else:
        top[token] = lp


def _num(v: Any, where: str) -> float | None:
    if v is None:
        return None
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        try:
            f = float(v)
        except OverflowError:  # an integer too large for a float: no logprob at all
            raise LogprobFormatError(f"{where}: logprob {str(v)[:20]}... is out of range") from None
        return f if math.isfinite(f) or f == -math.inf else None
    raise LogprobFormatError(f"{where}: logprob {v!r} is not a number")


def _with_offsets(positions: list[Position]) -> TokenTrack:
    off = 0
    for p in positions:
        p.offset = off
        off += len(p.token)
    return TokenTrack(positions)


def parse_chat_logprobs(content: list[dict[str, Any]] | None) -> TokenTrack:
    """``choices[0].logprobs.content`` of a chat completion (``Exchange.logprobs``)."""
    if content is None:
        raise LogprobFormatError("logprobs.content is absent: the endpoint returned no logprobs")
    if not isinstance(content, list):
        raise LogprobFormatError("logprobs.content is not a list")
    out: list[Position] = []
    for i, e in enumerate(content):
        if not isinstance(e, dict) or "token" not in e:
            raise LogprobFormatError(f"logprobs.content[{i}] has no 'token'")
        top: dict[str, float] = {}
        alternatives = e.get("top_logprobs") or []
        if not isinstance(alternatives, list):
            raise LogprobFormatError(f"logprobs.content[{i}].top_logprobs is not a list")
        for j, t in enumerate(alternatives):
            if not isinstance(t, dict):
                raise LogprobFormatError(f"logprobs.content[{i}].top_logprobs[{j}] is not an object")
            lp = _num(t.get("logprob"), f"logprobs.content[{i}].top_logprobs[{j}]")
            if lp is not None:
                _merge(top, _key(t.get("token"), t.get("bytes")), lp)
        out.append(Position(token=_key(e["token"], e.get("bytes")),
                            logprob=_num(e.get("logprob"), f"logprobs.content[{i}]"),
                            top=top))
    return _with_offsets(out)


def parse_legacy_logprobs(lp: dict[str, Any] | None) -> TokenTrack:
    """``choices[0].logprobs`` of a legacy completion (with ``echo``: prompt tokens first)."""
    if not isinstance(lp, dict) or not isinstance(lp.get("tokens"), list):
        raise LogprobFormatError("choices[0].logprobs.tokens is absent: the endpoint returned no legacy logprobs")
    toks, lps = lp["tokens"], lp.get("token_logprobs") or []
    tops = lp.get("top_logprobs") or []
    if not isinstance(lps, list) or not isinstance(tops, list):
        raise LogprobFormatError("choices[0].logprobs.token_logprobs / top_logprobs is not a list")
    out: list[Position] = []
    for i, tok in enumerate(toks):
        top: dict[str, float] = {}
        t = tops[i] if i < len(tops) else None
        if t is not None and not isinstance(t, dict):
            raise LogprobFormatError(f"logprobs.top_logprobs[{i}] is not a mapping of token -> logprob")
        for s, v in (t or {}).items():
            val = _num(v, f"logprobs.top_logprobs[{i}]")
            if val is not None:
                _merge(top, s, val)
        out.append(Position(token=_key(tok, None), logprob=_num(lps[i] if i < len(lps) else None,
                                                                 f"logprobs.token_logprobs[{i}]"), top=top))
    return _with_offsets(out)


def parse_vllm_prompt_logprobs(plp: list[Any] | None, k: int) -> TokenTrack:
    """vLLM ``prompt_logprobs``: entry i maps token-id strings to ``{logprob, rank, decoded_token}``.

    vLLM lists the top-``k`` (ranks 1..k) plus the actual prompt token when it is outside them. When
    the dict has k + 1 entries the actual token is the extra one; with exactly k it is one of the top-k
    and vLLM does not say which, so the position keeps its alternatives but its actual token is
    unknown (``token`` = "", never aligned, counted as misaligned).
    """
    if not isinstance(plp, list):
        raise LogprobFormatError("prompt_logprobs is absent: the endpoint does not support vLLM's prompt_logprobs")
    out: list[Position] = []
    for i, entry in enumerate(plp):
        if entry is None:
            continue  # the first prompt token has no distribution
        if not isinstance(entry, dict) or not entry:
            raise LogprobFormatError(f"prompt_logprobs[{i}] is not a mapping of token ids")
        top: dict[str, float] = {}
        actual: tuple[str, float | None] = ("", None)
        for tid, v in entry.items():
            if not isinstance(v, dict):
                raise LogprobFormatError(f"prompt_logprobs[{i}][{tid}] is not an object")
            tok, lp, rank = str(v.get("decoded_token", tid)), _num(v.get("logprob"),
                                                                   f"prompt_logprobs[{i}]"), v.get("rank")
            if isinstance(rank, int) and rank > k:
                actual = (tok, lp)
            elif lp is not None:
                _merge(top, tok, lp)
        out.append(Position(token=actual[0], logprob=actual[1], top=top))
    return _with_offsets(out)


@dataclass
class Aligned:
    """Positions both sides share, as arrays the estimator and statistics take."""

    ref: TopK
    cand: TopK
    ref_token_lp: np.ndarray
    cand_token_lp: np.ndarray
    same_top: np.ndarray
    misaligned: int  # positions present on one side that could not be paired
    compared: int
    #: each compared position's (character offset from ``start_offset``, token): where in the text it sits, so two
    #: paths over the same text can be matched position by position
    keys: list[tuple[int, str]] = field(default_factory=list)


def _first_top(top: dict[str, float]) -> str | None:
    return max(top.items(), key=lambda kv: kv[1])[0] if top else None


def align_tracks(ref: TokenTrack, cand: TokenTrack, *, start_offset: int = 0, interner: Interner | None = None,
                 limit_positions: int | None = None) -> Aligned:
    """Pair positions at or after ``start_offset`` (characters) that start at the same offset with the same token."""
    intern = interner or Interner()
    cmap = {(p.offset, p.token): p for p in cand.positions if p.offset >= start_offset}
    pairs: list[tuple[Position, Position]] = []
    r_count = 0
    for p in ref.positions:
        if p.offset < start_offset:
            continue
        r_count += 1
        q = cmap.get((p.offset, p.token))
        if q is not None and p.logprob is not None and q.logprob is not None and p.top and q.top:
            pairs.append((p, q))
    if limit_positions is not None:
        pairs = pairs[:limit_positions]
    c_count = len(cmap)
    misaligned = (r_count - len(pairs)) + (c_count - len(pairs))
    k_r = max((len(p.top) for p, _ in pairs), default=1)
    k_c = max((len(q.top) for _, q in pairs), default=1)
    n = len(pairs)
    r_ids = np.full((n, k_r), -1, dtype=np.int64)
    c_ids = np.full((n, k_c), -1, dtype=np.int64)
    r_lp = np.full((n, k_r), -np.inf)
    c_lp = np.full((n, k_c), -np.inf)
    same = np.zeros(n, dtype=bool)
    for i, (p, q) in enumerate(pairs):
        for j, (tok, lp) in enumerate(p.top.items()):
            r_ids[i, j], r_lp[i, j] = intern(tok), lp
        for j, (tok, lp) in enumerate(q.top.items()):
            c_ids[i, j], c_lp[i, j] = intern(tok), lp
        same[i] = _first_top(p.top) == _first_top(q.top)
    return Aligned(ref=TopK(r_ids, r_lp), cand=TopK(c_ids, c_lp),
                   ref_token_lp=np.array([p.logprob for p, _ in pairs], dtype=np.float64),
                   cand_token_lp=np.array([q.logprob for _, q in pairs], dtype=np.float64),
                   same_top=same, misaligned=misaligned, compared=n,
                   keys=[(p.offset - start_offset, p.token) for p, _ in pairs])


def common_prefix(ref: TokenTrack, cand: TokenTrack) -> int:
    """Number of leading positions where two generations emitted the same tokens (the first divergence index)."""
    n = 0
    for p, q in zip(ref.positions, cand.positions):
        if p.token != q.token:
            break
        n += 1
    return n
