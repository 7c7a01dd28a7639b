"""Stated versus measured: each claim an endpoint's provider makes, checked against what the run saw.

Why a module of its own: a provider's listing (OpenRouter's ``quantization``, ``supported_parameters``,
``supports_implicit_caching``, ``context_length``) is a product spec, and the run already measures each of those
things somewhere (the KL fingerprint, the forced tool calls, the logprob probe, the cache suite, the opt-in
context probe, the ``response_format`` probe). This module only *reads* those figures and says, per claim,
``agrees``, ``contradicts`` or ``not checked``, with the evidence in words. It is deliberately asymmetric:
``contradicts`` needs confident evidence (for precision: a calibrated profile of another precision, ahead by the
fingerprint's margin), and every gap in the evidence is ``not checked`` with the reason, never a silent agreement.
"""

from __future__ import annotations

import math
import re
from typing import Any

from pydantic import BaseModel

from verifier.kinds.logprob.fingerprint import AMBIGUOUS_MARGIN
from verifier.records import StatedClaims
from verifier.run.format_probe import FormatProbe
from verifier.run.summary import ClaimCheck, EndpointSuiteResult, RunSummary

__all__ = ["ContextProbe", "PRECISION_CLAIMS", "check_claims", "contradiction_headline", "precision_class",
           "profile_precision"]

#: The claims read against the KL fingerprint, and what part of a profile each describes.
PRECISION_CLAIMS = ("quantization", "kv_cache", "decode_weights")
#: Parameters the run has a check for; the rest of a stated list is reported once, as not checked.
CHECKED_PARAMETERS = ("tools", "tool_choice", "logprobs", "response_format")
#: Precision classes, finest first. bf16 and fp16 are one class: no fingerprint here tells them apart.
_RANK = {"fp32": 0, "16-bit": 1, "fp8": 2, "int8": 2, "fp6": 3, "fp4": 4, "int4": 4}
_ALIASES = [
    (r"fp32|float32|f32", "fp32"),
    (r"bf16|bfloat16|fp16|float16|f16|half|16-?bit", "16-bit"),
    (r"fp8.*|float8.*|f8.*|e4m3|e5m2", "fp8"),
    (r"int8|w8a8|w8a16|q8.*|8-?bit", "int8"),
    (r"fp6.*", "fp6"),
    (r"fp4|nvfp4|mxfp4|4-?bit-?float", "fp4"),
    (r"int4|w4a16|w4a8|awq|gptq|q4.*|4-?bit", "int4"),
]


class ContextProbe(BaseModel):
    """The opt-in ``--probe-context`` request near an endpoint's stated context length (verifier/run/context_probe)."""

    stated: int
    target_tokens: int  # how large a prompt the probe aimed for
    prompt_tokens: int | None = None  # what the endpoint counted (usage), when it answered
    status: int | None = None
    accepted: bool = False
    error: str | None = None  # one line: the endpoint's message or the transport failure


def precision_class(text: Any) -> str | None:
    """``"fp8-e4m3"`` -> ``"fp8"``, ``"bfloat16"`` -> ``"16-bit"``; None for "unknown" or anything unrecognised."""
    if not isinstance(text, str):
        return None
    t = text.strip().lower().replace("_", "-")
    for pattern, cls in _ALIASES:
        if re.fullmatch(pattern, t):
            return cls
    return None


def profile_precision(name: str) -> dict[str, str] | None:
    """What a fingerprint profile name says about each precision claim, or None when the name is not parseable.

    ``bf16`` -> all 16-bit; ``fp8-kv`` -> KV cache fp8; ``int4-decode`` -> decode weights int4;
    ``int4-weights`` / ``int4`` -> all weights int4; parts joined by ``+`` combine (``fp8-kv+int4-decode``).
    ``quantization`` (a listing's single label) is the lowest weight precision the endpoint computes with.
    """
    out = {"weights": "16-bit", "kv_cache": "16-bit", "decode_weights": "16-bit"}
    for part in name.lower().split("+"):
        m = re.fullmatch(r"([a-z0-9]+?)(?:-(kv|kv-cache|decode|decode-weights|weights|w))?", part.strip())
        cls = precision_class(m.group(1)) if m else None
        if m is None or cls is None:
            return None
        where = m.group(2)
        if where in ("kv", "kv-cache"):
            out["kv_cache"] = cls
        elif where in ("decode", "decode-weights"):
            out["decode_weights"] = cls
        else:
            out["weights"] = out["decode_weights"] = cls
    lowest = max(out["weights"], out["decode_weights"], key=lambda c: _RANK[c])
    return {"quantization": lowest, "kv_cache": out["kv_cache"], "decode_weights": out["decode_weights"]}


# ---------------------------------------------------------------------------------------------------------------
# precision claims against the KL fingerprint
# ---------------------------------------------------------------------------------------------------------------

def _fingerprint_of(summary: RunSummary, endpoint: str) -> dict[str, Any] | None:
    fp = summary.fingerprints.get(endpoint)
    if isinstance(fp, dict) and "verdict" in fp:
        return fp
    for r in summary.results:
        if r.endpoint == endpoint and isinstance(r.extra.get("fingerprint"), dict):
            return r.extra["fingerprint"]
    return None


def _check_precision(claim: str, stated: str, fp: dict[str, Any] | None, margin: float) -> ClaimCheck:
    def row(status: str, evidence: str, measured: Any = None) -> ClaimCheck:
        return ClaimCheck(claim=claim, stated=stated, measured=measured, status=status, evidence=evidence)  # type: ignore[arg-type]

    want = precision_class(stated)
    if want is None:
        return row("not checked", f"'{stated}' is not a precision this check knows (e.g. bf16, fp8, int8, int4)")
    if fp is None:
        return row("not checked", "no KL fingerprint in this run (run a logprob suite against a reference)")
    verdict = str(fp.get("verdict"))
    if verdict == "no profiles":
        return row("not checked", "no calibrated precision profiles for this model and suite, so precision cannot be "
                                  "checked" + (f" ({fp['reason']})" if fp.get("reason") else ""))
    if verdict == "unknown":
        return row("not checked", "the KL profile matches no calibrated profile"
                                  + (f" ({fp['reason']})" if fp.get("reason") else ""), measured="unknown")
    ranking = [(str(n), float(d)) for n, d in fp.get("ranking", [])]
    classes = {n: p[claim] for n, d in ranking if (p := profile_precision(n)) is not None}
    best = verdict
    best_cls = classes.get(best)
    dist = fp.get("distance")
    if best_cls is None or not isinstance(dist, int | float):
        return row("not checked", f"closest profile '{best}' does not say which precision it is", measured=best)
    if want not in classes.values():
        return row("not checked", f"no calibrated profile has {claim} {want} to compare with "
                                  f"(profiles: {', '.join(classes)})", measured=best)
    confident = fp.get("confident") is not False  # an explicit flag of the fingerprint, when it has one
    if best_cls == want:
        others = [(n, d) for n, d in ranking if classes.get(n) not in (None, want)]
        lead = min((d for _, d in others), default=math.inf) - float(dist)
        if lead >= margin and confident:
            return row("agrees", f"behaves like {best} ({claim} {best_cls}); the nearest profile of another "
                                 f"{claim} is {_decades(lead)} further", measured=best)
        rival = min(others, key=lambda x: x[1])[0] if others else "?"
        return row("not checked", f"closest profile {best} has {claim} {want}, but {rival} ({claim} "
                                  f"{classes.get(rival)}) is within the margin ({_decades(lead)} < {margin:g}): "
                                  "the fingerprint cannot tell them apart", measured=best)
    nearest = min(((n, d) for n, d in ranking if classes.get(n) == want), key=lambda x: x[1])
    lead = nearest[1] - float(dist)
    extra = f"; p = {fp['p_value']:.3g}" if isinstance(fp.get("p_value"), int | float) else ""
    if lead >= margin and confident:
        return row("contradicts", f"behaves like {best} (margin {_decades(lead)} of KL over {nearest[0]}, the "
                                  f"closest {want} profile{extra})", measured=best)
    return row("not checked", f"closest profile {best} has {claim} {best_cls}, but {nearest[0]} ({want}) is within "
                              f"the margin ({_decades(lead)} < {margin:g}): not confident", measured=best)


def _decades(x: float) -> str:
    return "∞" if math.isinf(x) else f"{x:.2f} decades"


# ---------------------------------------------------------------------------------------------------------------
# parameters, caching and context length against what the run saw
# ---------------------------------------------------------------------------------------------------------------

def _mine(summary: RunSummary, endpoint: str, kind: str) -> list[EndpointSuiteResult]:
    return [r for r in summary.results if r.endpoint == endpoint and r.kind == kind]


def _check_parameter(name: str, summary: RunSummary, endpoint: str, formats: FormatProbe | None) -> ClaimCheck:
    claim = f"supported_parameters:{name}"

    def row(status: str, evidence: str, measured: Any = None) -> ClaimCheck:
        return ClaimCheck(claim=claim, stated=True, measured=measured, status=status, evidence=evidence)  # type: ignore[arg-type]

    tool = _mine(summary, endpoint, "toolcall")
    if name == "tools":
        calls = sum(r.counts.get("tool_calls", 0) for r in tool)
        forced = sum(r.metrics["forced_call_success"].n for r in tool if "forced_call_success" in r.metrics)
        if calls:
            return row("agrees", f"returned {calls} tool call(s) in the tool-call suites", measured=calls)
        if forced:
            return row("contradicts", f"no tool call at all, even in {forced} reply(ies) to forced calls", measured=0)
        return row("not checked", "no tool-call suite with answered requests in this run")
    if name == "tool_choice":
        judged = sum(r.metrics["forced_call_success"].n for r in tool if "forced_call_success" in r.metrics)
        ignored = sum(r.counts.get("forced:no_call", 0) + r.counts.get("forced:wrong_tool", 0) for r in tool)
        if not judged:
            return row("not checked", "no forced call (tool_choice required or named) answered in this run")
        measured = f"obeyed {judged - ignored} of {judged}"
        if ignored:
            return row("contradicts", f"tool_choice ignored in {ignored} of {judged} forced calls (no call, or "
                                      "another tool than the one named)", measured=measured)
        return row("agrees", f"tool_choice (required / named) obeyed in {judged} of {judged} forced calls",
                   measured=measured)
    if name == "logprobs":
        probes = [r.extra["probe"] for r in _mine(summary, endpoint, "logprob") if isinstance(r.extra.get("probe"),
                                                                                             dict)]
        ok = sorted({m for p in probes for m, v in p.items() if m != "exact" and isinstance(v, dict)
                     and v.get("supported")})
        if ok:
            return row("agrees", f"logprobs returned ({', '.join(ok)})", measured=ok)
        refused = [str(p["chat_logprobs"].get("reason")) for p in probes if isinstance(p.get("chat_logprobs"), dict)
                   and p["chat_logprobs"].get("supported") is False and p["chat_logprobs"].get("reason")]
        if refused:
            return row("contradicts", f"no logprobs by any method; chat logprobs: {refused[0]}", measured=[])
        return row("not checked", "no logprob suite (or no conclusive logprob probe) in this run")
    if name == "response_format":
        return _check_response_format(formats)
    return row("not checked", "the run has no check for this parameter")


def _check_response_format(probe: FormatProbe | None) -> ClaimCheck:
    """JSON mode against the probe (verifier/run/format_probe): every reply a JSON object agrees; a refusal naming
    the parameter, or an answer that is not a JSON object, contradicts; faults and cut replies leave it open."""
    claim, ask = "supported_parameters:response_format", "response_format json_object"

    def row(status: str, evidence: str, measured: Any = None) -> ClaimCheck:
        return ClaimCheck(claim=claim, stated=True, measured=measured, status=status, evidence=evidence)  # type: ignore[arg-type]

    if probe is None or not probe.replies:
        return row("not checked", "no response_format probe recorded for this endpoint (the run sends one when the "
                                  "parameter is stated; a run folder from an older version has none)")
    n = len(probe.replies)
    by: dict[str, list] = {}
    for r in probe.replies:
        by.setdefault(r.outcome, []).append(r)
    parsed = len(by.get("parsed", []))
    measured = f"parsed {parsed} of {n}"
    if "refused" in by:
        first = by["refused"][0]
        return row("contradicts", f"{ask} refused in {len(by['refused'])} of {n} requests: HTTP {first.status} "
                                  f"{first.detail or ''}".rstrip(), measured="refused")
    if "not_json" in by:
        bad = by["not_json"]
        return row("contradicts", f"{len(bad)} of {n} replies to {ask} did not parse as a JSON object (first: "
                                  f"{bad[0].detail}); {parsed} of {n} did", measured=measured)
    if parsed == n:
        return row("agrees", f"{n} of {n} replies to {ask} parsed as JSON objects", measured=measured)
    reasons = []
    if "fault" in by:
        reasons.append(f"{len(by['fault'])} of {n} requests failed without an answer ({by['fault'][0].detail})")
    if "rejected" in by:
        first = by["rejected"][0]
        reasons.append(f"{len(by['rejected'])} of {n} requests refused without naming response_format (HTTP "
                       f"{first.status}: {first.detail})")
    if "truncated" in by:
        reasons.append(f"{len(by['truncated'])} of {n} replies cut by max_tokens before the object closed")
    return row("not checked", f"{parsed} of {n} replies to {ask} parsed as JSON objects; " + "; ".join(reasons),
               measured=measured)


def _check_caching(stated: bool, summary: RunSummary, endpoint: str) -> ClaimCheck:
    def row(status: str, evidence: str, measured: Any = None) -> ClaimCheck:
        return ClaimCheck(claim="implicit_caching", stated=stated, measured=measured, status=status,  # type: ignore[arg-type]
                          evidence=evidence)

    cache = _mine(summary, endpoint, "cache")
    if not cache:
        return row("not checked", "no cache suite in this run")
    classes = [str(r.extra.get("cache_class")) for r in cache]
    hit = next((r.metrics.get("cache_hit_rate") for r in cache if r.extra.get("cache_class") in
                ("partial", "near_bound")), None)
    if hit is not None and hit.value is not None:
        rate = f"hit rate {100 * hit.value:.1f}% [{100 * (hit.low or 0):.1f}, {100 * (hit.high or 0):.1f}] " \
               f"over n={hit.n}"
        return row("agrees" if stated else "contradicts", f"real cache hits: {rate}", measured="hits")
    if "reported_zero" in classes:
        return row("contradicts" if stated else "agrees",
                   "cached tokens reported as zero on every repeated prefix", measured="reported zero")
    if "not_reported" in classes:
        return row("not checked", "the endpoint reports no cached-token count (absent, not zero), so caching "
                                  "cannot be seen", measured="not reported")
    return row("not checked", "the cache suite had no usable repeated requests", measured="no data")


def _check_context(stated: int, probe: ContextProbe | None) -> ClaimCheck:
    def row(status: str, evidence: str, measured: Any = None) -> ClaimCheck:
        return ClaimCheck(claim="context_length", stated=stated, measured=measured, status=status,  # type: ignore[arg-type]
                          evidence=evidence)

    if probe is None:
        return row("not checked", "opt-in: run with --probe-context (one request near the stated limit; it costs "
                                  "that many prompt tokens)")
    if probe.accepted:
        got = probe.prompt_tokens
        if got is not None and got < 0.9 * stated:
            return row("not checked", f"the probe reached only {got} of {stated} tokens", measured=got)
        return row("agrees", f"a prompt of {got if got is not None else f'about {probe.target_tokens}'} tokens "
                             f"was accepted (stated {stated})", measured=got)
    if probe.status is not None and 400 <= probe.status < 500 and probe.status not in (401, 403, 429):
        return row("contradicts", f"a prompt of about {probe.target_tokens} tokens (stated limit {stated}) was "
                                  f"refused: HTTP {probe.status} {probe.error or ''}".rstrip(),
                   measured=f"refused at about {probe.target_tokens}")
    return row("not checked", f"the probe failed without an answer about length: {probe.error or probe.status}")


# ---------------------------------------------------------------------------------------------------------------
# the whole table, and the headline sentence for a contradiction
# ---------------------------------------------------------------------------------------------------------------

def check_endpoint(summary: RunSummary, endpoint: str, claims: StatedClaims,
                   probe: ContextProbe | None = None, margin: float = AMBIGUOUS_MARGIN,
                   formats: FormatProbe | None = None) -> list[ClaimCheck]:
    """Every stated claim of one endpoint, in the order of :class:`StatedClaims`' fields; ``probe`` is its
    ``--probe-context`` result, ``formats`` its ``response_format`` probe (None: not sent)."""
    out: list[ClaimCheck] = []
    fp = _fingerprint_of(summary, endpoint)
    for name in PRECISION_CLAIMS:
        stated = getattr(claims, name)
        if stated is None:
            continue
        if endpoint == summary.reference:  # the yardstick has no fingerprint: precision is measured against it
            out.append(ClaimCheck(claim=name, stated=stated, status="not checked",
                                  evidence="the reference: precision is measured relative to it, not of it"))
        else:
            out.append(_check_precision(name, stated, fp, margin))
    if claims.context_length is not None:
        out.append(_check_context(claims.context_length, probe))
    if claims.supported_parameters is not None:
        listed = list(dict.fromkeys(claims.supported_parameters))
        out += [_check_parameter(p, summary, endpoint, formats) for p in CHECKED_PARAMETERS if p in listed]
        rest = [p for p in listed if p not in CHECKED_PARAMETERS]
        if rest:
            out.append(ClaimCheck(claim="supported_parameters (others)", stated=rest, status="not checked",
                                  evidence="the run has no check for these parameters"))
    if claims.implicit_caching is not None:
        out.append(_check_caching(claims.implicit_caching, summary, endpoint))
    return out


def check_claims(summary: RunSummary, probes: dict[str, ContextProbe] | None = None,
                 formats: dict[str, FormatProbe] | None = None) -> dict[str, list[ClaimCheck]]:
    """The ``claims`` table of the summary: every endpoint that states something, each claim checked."""
    probes, formats = probes or {}, formats or {}
    return {ep.name: check_endpoint(summary, ep.name, ep.claims, probes.get(ep.name), formats=formats.get(ep.name))
            for ep in summary.endpoints if ep.claims is not None}


def _stated_phrase(c: ClaimCheck) -> str:
    if c.claim == "quantization":
        return str(c.stated)
    if c.claim == "kv_cache":
        return f"KV cache {c.stated}"
    if c.claim == "decode_weights":
        return f"decode weights {c.stated}"
    if c.claim == "context_length":
        return f"context length {c.stated}"
    if c.claim == "implicit_caching":
        return "implicit caching" if c.stated else "no implicit caching"
    return f"support for {c.claim.partition(':')[2] or c.claim}"


def contradiction_headline(endpoint: str, checks: list[ClaimCheck]) -> str | None:
    """``cand states fp8; behaves like int4-decode (margin ...)``: the first contradiction, or None."""
    c = next((c for c in checks if c.status == "contradicts"), None)
    if c is None:
        return None
    return f"{endpoint} states {_stated_phrase(c)}; {c.evidence}"
