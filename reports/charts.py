"""Charts as inline SVG strings, drawn with matplotlib's object API (no pyplot, no global backend state).

Why SVG text rather than PNG: the report must be one self-contained file that prints sharply and makes no
request; an inline ``<svg>`` needs neither a data URI nor a font download. Text stays text
(``svg.fonttype = none``), so charts are searchable and small. ``text.parse_math`` is off because endpoint
names are user input and a ``$`` in one must not be read as TeX.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from verifier.records import Interval
from verifier.run.summary import Series

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["colour_map", "difference_chart", "history_chart", "latency_chart", "rates_chart", "series_chart",
           "series_title", "trend_chart"]

# A colour-blind-safe palette (Okabe-Ito); the reference is always drawn first, in black.
PALETTE = ["#000000", "#E69F00", "#56B4E9", "#009E73", "#D55E00", "#0072B2", "#CC79A7", "#F0E442"]
_RC = {
    "svg.fonttype": "none",
    "text.parse_math": False,
    "font.size": 10,  # at a phone's 390 px the 4.6-inch figure shrinks to ~0.8: text stays >= 10 px
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
}
_XML_HEAD = re.compile(r"^.*?(?=<svg)", re.S)


def _matplotlib():  # noqa: ANN202 - the matplotlib module
    """matplotlib, imported when the first chart is drawn. Why not at module level: importing it costs about a
    third of a second, and many pages (a single-endpoint run, every `verifier` command that renders nothing) draw
    no chart at all."""
    import matplotlib

    return matplotlib


def _svg(fig: Figure, key: str) -> str:
    """Serialise a figure to an inline ``<svg>`` element (no XML prolog, ids salted by ``key``)."""
    buf = io.StringIO()
    with _matplotlib().rc_context({**_RC, "svg.hashsalt": key}):
        # constrained layout already fits; "tight" would draw twice
        fig.savefig(buf, format="svg", metadata={"Date": None})
    text = _XML_HEAD.sub("", buf.getvalue(), count=1)
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text, count=1, flags=re.S)  # RDF boilerplate with URLs
    # matplotlib numbers ids per figure (figure_1, axes_1, ...): several inline SVGs in one page would repeat them.
    # Prefix every id and every in-document reference to it with this chart's key.
    prefix = re.sub(r"[^A-Za-z0-9_-]", "_", key)
    text = re.sub(r'\bid="([^"]+)"', lambda m: f'id="{prefix}-{m.group(1)}"', text)
    text = re.sub(r'href="#([^"]+)"', lambda m: f'href="#{prefix}-{m.group(1)}"', text)
    text = re.sub(r"url\(#([^)]+)\)", lambda m: f"url(#{prefix}-{m.group(1)})", text)
    return text.replace("<svg ", '<svg role="img" ', 1)


def _plain_ticks(axis) -> None:  # noqa: ANN001 - a matplotlib Axis
    """Log-axis labels as plain numbers: the default formatter emits TeX, and TeX parsing is off."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


def _figure(width: float = 4.6, height: float = 2.8) -> Figure:
    from matplotlib.figure import Figure

    with _matplotlib().rc_context(_RC):
        return Figure(figsize=(width, height), layout="constrained")


def _colour(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def colour_map(endpoints: Sequence[str]) -> dict[str, str]:
    """One colour per endpoint for the whole report (reference first, so it is black everywhere)."""
    return {e: _colour(i) for i, e in enumerate(endpoints)}


def _pick(colours: Mapping[str, str] | None, endpoint: str, i: int) -> str:
    return colours.get(endpoint, _colour(i)) if colours else _colour(i)


def rates_chart(rows: Sequence[tuple[str, str, Interval]], key: str, colours: Mapping[str, str] | None = None) -> str:
    """Proportions with 95% CIs: one dot + error bar per (metric, endpoint), grouped by metric."""
    metrics = list(dict.fromkeys(m for m, _, _ in rows))
    endpoints = list(dict.fromkeys(e for _, e, _ in rows))
    with _matplotlib().rc_context(_RC):
        fig = _figure(4.6, max(1.8, 0.22 * len(rows) + 0.35 * len(metrics) + 0.6))
        ax = fig.add_subplot()
        ticks, labels, y = [], [], 0.0
        for m in metrics:
            for e in endpoints:
                found = [(iv.value, iv.low, iv.high, iv.n) for mm, ee, iv in rows
                         if mm == m and ee == e and iv.value is not None]
                if not found:
                    continue
                value, low, high, n = found[0]
                lo = value - low if low is not None else 0.0
                hi = high - value if high is not None else 0.0
                ax.errorbar([value], [y], xerr=[[max(lo, 0.0)], [max(hi, 0.0)]], fmt="o", ms=4, capsize=3,
                            color=_pick(colours, e, endpoints.index(e)))
                ticks.append(y)
                labels.append(f"{m} · {e} (n={n})")
                y -= 1.0
            y -= 0.6
        ax.set_yticks(ticks, labels)
        ax.set_xlim(-0.02, 1.02)
        ax.set_xlabel("rate (dot) with 95% CI (bar)")
        return _svg(fig, key)


def series_title(name: str) -> str:
    return name.replace("_", " ")


def series_chart(name: str, by_endpoint: Mapping[str, Series], key: str,
                 colours: Mapping[str, str] | None = None) -> str:
    """One Series name across endpoints: lines (steps for survival/CDF curves) with their CI bands."""
    lname = name.lower()
    step = any(w in lname for w in ("survival", "cdf"))
    with _matplotlib().rc_context(_RC):
        fig = _figure()
        ax = fig.add_subplot()
        any_s = next(iter(by_endpoint.values()))
        for i, (endpoint, s) in enumerate(by_endpoint.items()):
            if not s.x:
                continue
            c = _pick(colours, endpoint, i)
            drawstyle = "steps-post" if step else "default"
            ax.plot(s.x, s.y, color=c, drawstyle=drawstyle, marker=None if step or len(s.x) > 30 else "o", ms=3,
                    label=f"{endpoint}")
            if s.low is not None and s.high is not None and len(s.low) == len(s.x) == len(s.high):
                ax.fill_between(s.x, s.low, s.high, color=c, alpha=0.15, step="post" if step else None, linewidth=0)
            elif s.high is not None and len(s.high) == len(s.x):  # an upper reference line only (e.g. cache bound)
                ax.plot(s.x, s.high, color=c, linestyle="--", linewidth=1, label=f"{endpoint} (upper line)")
        if "kl" in lname and any(v > 0 for s in by_endpoint.values() for v in s.x) and not step:
            ax.set_xscale("symlog", linthresh=1e-4)
            _plain_ticks(ax.xaxis)
        ax.set_xlabel(any_s.x_label or "x")
        ax.set_ylabel(any_s.y_label or series_title(name))
        ax.legend(loc="best", frameon=False)
        return _svg(fig, key)


def latency_chart(by_endpoint: Mapping[str, Sequence[float]], key: str,
                  colours: Mapping[str, str] | None = None) -> str:
    """Latency distributions as empirical CDFs (log time axis), n per endpoint in the legend."""
    with _matplotlib().rc_context(_RC):
        fig = _figure()
        ax = fig.add_subplot()
        for i, (endpoint, values) in enumerate(by_endpoint.items()):
            xs = sorted(v for v in values if v is not None and v > 0 and math.isfinite(v))
            if not xs:
                continue
            ys = [(j + 1) / len(xs) for j in range(len(xs))]
            ax.plot(xs, ys, drawstyle="steps-post", color=_pick(colours, endpoint, i),
                    label=f"{endpoint} (n={len(xs)})")
        ax.set_xscale("log")
        _plain_ticks(ax.xaxis)
        ax.set_xlabel("request latency, seconds (log scale)")
        ax.set_ylabel("share of requests at or below")
        ax.set_ylim(0, 1.02)
        ax.legend(loc="lower right", frameon=False)
        return _svg(fig, key)


def history_chart(points: Mapping[str, Sequence[tuple[str, float, float | None, float | None]]], metric: str,
                  key: str, colours: Mapping[str, str] | None = None) -> str:
    """A metric over runs per endpoint: (started_at, value, low, high), CI as error bars, oldest left."""
    with _matplotlib().rc_context(_RC):
        fig = _figure(4.6, 2.8)
        ax = fig.add_subplot()
        runs = sorted({p[0] for pts in points.values() for p in pts})
        index = {r: i for i, r in enumerate(runs)}
        for i, (endpoint, pts) in enumerate(points.items()):
            xs = [index[p[0]] for p in pts]
            ys = [p[1] for p in pts]
            lo = [p[1] - p[2] if p[2] is not None else 0.0 for p in pts]
            hi = [p[3] - p[1] if p[3] is not None else 0.0 for p in pts]
            ax.errorbar(xs, ys, yerr=[[max(v, 0) for v in lo], [max(v, 0) for v in hi]], fmt="-o", ms=3, capsize=2,
                        color=_pick(colours, endpoint, i), label=endpoint)
        step = max(1, len(runs) // 8)
        ax.set_xticks(range(0, len(runs), step), [runs[j][:10] for j in range(0, len(runs), step)])
        ax.set_xlabel("run (start date)")
        ax.set_ylabel(metric)
        ax.legend(loc="best", frameon=False)
        return _svg(fig, key)


def trend_chart(lines: Mapping[str, Sequence[tuple[int, float, float | None, float | None]]], ticks: Sequence[str],
                drift: Mapping[str, Sequence[tuple[int, float]]], y_label: str, key: str,
                colours: Mapping[str, str] | None = None, zero_line: bool = False) -> str:
    """A figure over a long run history: one line per series (endpoint), its 95% CI as a band, drift as red crosses.

    ``lines``: series -> (run index, value, low, high); ``ticks``: run labels by index (a newline splits date and
    time); ``drift``: series -> points flagged by the drift test; ``zero_line``: draw y = 0 (differences from the
    reference). A band instead of error bars keeps a chart of hundreds of runs small and legible.
    """
    with _matplotlib().rc_context(_RC):
        fig = _figure(4.6, 2.8)
        ax = fig.add_subplot()
        if zero_line:
            ax.axhline(0.0, color="#57606a", linewidth=0.8)
        for i, (name, pts) in enumerate(lines.items()):
            c = _pick(colours, name, i + 1)
            xs = [p[0] for p in pts]
            ax.plot(xs, [p[1] for p in pts], color=c, marker="o" if len(pts) <= 60 else None, ms=3, linewidth=1.2,
                    label=name)
            banded = [(x, low, high) for x, _, low, high in pts if low is not None and high is not None]
            if banded:
                ax.fill_between([b[0] for b in banded], [b[1] for b in banded], [b[2] for b in banded], color=c,
                                alpha=0.15, linewidth=0)
            flagged = drift.get(name, [])
            if flagged:
                ax.plot([x for x, _ in flagged], [y for _, y in flagged], linestyle="none", marker="x", ms=7,
                        mew=2, color="#cf222e", label=f"{name}: drift")
        step = max(1, math.ceil(len(ticks) / 4))
        ax.set_xticks(range(0, len(ticks), step), [ticks[j] for j in range(0, len(ticks), step)])
        ax.set_xlabel("run start (UTC), oldest left")
        ax.set_ylabel(y_label)
        ax.legend(loc="best", frameon=False)
        return _svg(fig, key)


def difference_chart(rows: Sequence[tuple[str, str, Interval, str]], key: str,
                     colours: Mapping[str, str] | None = None) -> str:
    """Candidate minus reference with 95% CIs, one dot + bar per (metric, endpoint), on an axis zoomed to the
    differences (0 = same as the reference, drawn as a line). ``rows``: (label, endpoint, difference, unit).

    Why differences rather than the rates themselves: rates near 100% bunch at one end of a 0-1 axis and hide
    exactly what a reader asks, how far the candidate is from the reference and whether that could be noise.
    """
    unit = rows[0][3] if rows else ""
    scale = 100.0 if unit == "%" else 1.0
    with _matplotlib().rc_context(_RC):
        fig = _figure(4.6, max(1.8, 0.45 * len(rows) + 0.9))
        ax = fig.add_subplot()
        ax.axvline(0.0, color="#57606a", linewidth=0.8)
        ticks, labels, lows, highs = [], [], [0.0], [0.0]
        for y, (label, endpoint, d, _) in enumerate(rows):
            if d.value is None:
                continue
            v = d.value * scale
            lo = d.low * scale if d.low is not None else v
            hi = d.high * scale if d.high is not None else v
            ax.errorbar([v], [-y], xerr=[[max(v - lo, 0.0)], [max(hi - v, 0.0)]], fmt="o", ms=4, capsize=3,
                        color=_pick(colours, endpoint, y + 1))
            ticks.append(-y)
            labels.append(f"{label}\n{endpoint}")  # two lines: long endpoint names keep the axes wide
            lows.append(lo)
            highs.append(hi)
        span = max(highs) - min(lows) or 1.0
        ax.set_xlim(min(lows) - 0.08 * span, max(highs) + 0.08 * span)
        ax.set_ylim(-len(rows) + 0.4, 0.6)
        ax.set_yticks(ticks, labels)
        ax.set_xlabel("cand − ref" + (" (points)" if unit == "%" else f" ({unit})" if unit else ""))
        return _svg(fig, key)
