"""One format per kind of number, used by every page (report, dashboard): a reader compares like with like.

* proportions: percent with one decimal (``98.6%``); differences of proportions in points (``+1.2 pts``);
* seconds: three significant digits with the unit (``2.42 s``); differences signed with the unit (``+2.42 s``);
* other figures (KL in nats, medians of steps, tokens): four significant digits (``6.665e-13``), so values as
  small as 1e-13 are never shown as 0;
* p-values: two significant digits, ``< 0.0001`` below that.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from verifier.history.gate import metric_info

__all__ = ["fmt_diff", "fmt_mapping", "fmt_p", "fmt_plain", "fmt_value", "unit_of"]

NOT_MEASURED = "not measured"


def unit_of(metric: str) -> str:
    return metric_info(metric).unit


def fmt_plain(v: float) -> str:
    """Four significant digits; exact zero stays ``0``."""
    return f"{v:.4g}"


def fmt_value(metric: str, v: float | None) -> str:
    if v is None:
        return NOT_MEASURED
    unit = unit_of(metric)
    if unit == "%":
        return f"{100 * v:.1f}%"
    if unit == "s":
        return f"{v:.3g} s"
    return fmt_plain(v)


def fmt_diff(metric: str, v: float | None) -> str:
    """A difference candidate - reference, signed, with its unit."""
    if v is None:
        return "n/a"
    unit = unit_of(metric)
    if unit == "%":
        return f"{100 * v:+.1f} pts"
    if unit == "s":
        return f"{v:+.3g} s"
    return f"{v:+.4g}"


def fmt_p(p: float | None) -> str:
    if p is None:
        return "n/a"
    return "< 0.0001" if p < 1e-4 else f"{p:.2g}"


def _scalar(v: Any) -> str:
    if v is None:
        return "default"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return fmt_plain(v)
    if isinstance(v, Mapping):
        return "{" + fmt_mapping(v) + "}"
    if isinstance(v, list | tuple):
        return ", ".join(_scalar(x) for x in v) or "none"
    return str(v)


def fmt_mapping(m: Mapping[str, Any] | None) -> str:
    """Settings as ``key = value`` pairs for people (never a Python repr: None reads ``default``)."""
    if not m:
        return ""
    return "; ".join(f"{k} = {_scalar(v)}" for k, v in m.items())
