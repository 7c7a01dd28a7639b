"""The dashboard's trend panels: every endpoint's difference from the reference over time on one shared axis per
metric and suite, and cost per run when the runs recorded it.

Why differences on one axis: a panel per endpoint never lets a reader set a candidate beside the reference; the
difference from the reference in the same run (the paired comparison's CI where the run has one) shows both at
once, with 0 as the reference. A metric the reference does not have (trigger F1, mean KL) is already measured
against the reference and is drawn as it is.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from pydantic import BaseModel

from reports import charts
from verifier.history import MetricPoint
from verifier.history.gate import metric_info

__all__ = ["TrendChart", "cost_chart", "run_costs", "tick_labels", "trend_charts"]


class TrendChart(BaseModel):
    id: str
    title: str
    metric: str
    svg: str | None = None
    sentence: str | None = None  # when too few runs or a flat line cannot show a trend
    caption: str = ""

LATENCY_CAVEAT = ("Latency depends on the load of the machine that ran verifier and of the endpoint's servers, "
                  "not only on the model: read a change here as a prompt to look, not as a finding.")
MIN_RUNS = 3  # fewer runs than this: a sentence, no chart


def tick_labels(started: list[str]) -> list[str]:
    """Run labels for an axis: the date, and the time (UTC) too when some date holds more than one run."""
    dates = [s[:10] for s in started]
    clash = len(set(dates)) < len(dates)
    return [f"{s[:10]}\n{s[11:16]}" if clash else s[:10] for s in started]


def _scale(metric: str) -> tuple[float, str]:
    unit = metric_info(metric).unit
    return (100.0, "points") if unit == "%" else (1.0, "s") if unit == "s" else (1.0, "")


def trend_charts(points: list[MetricPoint], flags: dict[tuple[str, str], list[str]], order: list[str],
                 metrics: list[str]) -> list[TrendChart]:
    """One chart per (metric, suite): each candidate's difference from the reference, run by run."""
    out: list[TrendChart] = []
    for m_idx, metric in enumerate(metrics):
        suites = sorted({p.suite for p in points if p.metric == metric and p.value is not None})
        for s_idx, suite in enumerate(suites):
            mine = [p for p in points if p.metric == metric and p.suite == suite and p.value is not None]
            runs = sorted({(p.started_at, p.run_id) for p in mine})
            index = {r: i for i, (_, r) in enumerate(runs)}
            ref = {p.run_id: p.value for p in mine if p.is_reference and p.basis == "value"}
            paired = {(p.run_id, p.endpoint): p for p in mine if p.basis == "vs_reference"}
            scale, unit = _scale(metric)
            lines: dict[str, list[tuple[int, float, float | None, float | None]]] = defaultdict(list)
            drift: dict[str, list[tuple[int, float]]] = defaultdict(list)
            relative = bool(ref)
            for p in sorted((p for p in mine if p.basis == "value" and not p.is_reference),
                            key=lambda p: (p.started_at, p.run_id)):
                pair = paired.get((p.run_id, p.endpoint))
                if pair is not None and pair.value is not None:
                    y, lo, hi = pair.value, pair.ci_low, pair.ci_high
                elif relative and p.run_id in ref:
                    y, lo, hi = p.value - ref[p.run_id], None, None  # type: ignore[operator]
                elif relative:
                    continue  # the reference did not measure it in this run: no difference to draw
                else:
                    y, lo, hi = p.value, p.ci_low, p.ci_high  # type: ignore[assignment]
                pt = (index[p.run_id], y * scale, None if lo is None else lo * scale,
                      None if hi is None else hi * scale)
                lines[p.endpoint].append(pt)
                if any(f.startswith(f"{suite}/{metric}") for f in flags.get((p.run_id, p.endpoint), [])):
                    drift[p.endpoint].append((pt[0], pt[1]))
            lines = {e: lines[e] for e in order if e in lines}
            label = metric_info(metric).label
            title = f"{label} · {suite}: " + ("difference from the reference over time" if relative
                                               else "against the reference over time")
            own_unit = "%" if unit == "points" else unit  # a rate itself is in percent, its difference in points
            y_label = (f"cand − ref ({unit})" if relative else f"{label} ({own_unit})" if unit else label)
            caption = ("0 = the reference in the same run; band = 95% CI of the paired difference where the run "
                       "has one; red cross = drift flagged." if relative else
                       "Measured against the reference already (0 = identical to it); band = 95% CI.")
            if metric.startswith("latency"):
                caption += " " + LATENCY_CAVEAT
            cid = f"t{m_idx}-{s_idx}"
            ys = [y for pts in lines.values() for _, y, _, _ in pts]
            if not lines:
                continue
            if len(runs) < MIN_RUNS or max(ys) - min(ys) <= 1e-12 * max(1.0, abs(max(ys))):
                why = (f"{len(runs)} run{'s' if len(runs) != 1 else ''}, fewer than {MIN_RUNS}"
                       if len(runs) < MIN_RUNS else "the same value in every run")
                last = "; ".join(f"{e} {pts[-1][1]:+.4g}{' ' + unit if unit else ''} in the latest run"
                                 if relative else f"{e} {pts[-1][1]:.4g}{' ' + unit if unit else ''} in the latest run"
                                 for e, pts in lines.items())
                out.append(TrendChart(id=cid, title=title, metric=metric, caption=caption,
                                      sentence=f"{last} ({why}: no trend chart)."))
                continue
            ticks = tick_labels([s for s, _ in runs])
            out.append(TrendChart(id=cid, title=title, metric=metric, caption=caption,
                                  svg=charts.trend_chart(lines, ticks, drift, y_label, cid,
                                                         charts.colour_map(order), zero_line=relative)))
    return out


def run_costs(folders: dict[str, Path]) -> dict[str, tuple[str, dict[str, float]]]:
    """run_id -> (started_at, endpoint -> USD) from each known run folder's summary.json ``cost`` block
    (``{"cost": {NAME: {"usd": ...}}}``, written by the cost accounting); runs without one are left out."""
    out: dict[str, tuple[str, dict[str, float]]] = {}
    for run_id, folder in folders.items():
        try:
            data = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        cost = data.get("cost") if isinstance(data, dict) else None
        if not isinstance(cost, dict):
            continue
        usd = {str(e): float(c["usd"]) for e, c in cost.items()
               if isinstance(c, dict) and isinstance(c.get("usd"), int | float)}
        if usd:
            out[run_id] = (str(data.get("started_at", "")), usd)
    return out


def cost_chart(costs: dict[str, tuple[str, dict[str, float]]], order: list[str]) -> TrendChart | None:
    """Cost per run and endpoint in USD: a chart from three runs on, a sentence before; None without any cost."""
    if not costs:
        return None
    runs = sorted((started, run_id) for run_id, (started, _) in costs.items())
    index = {r: i for i, (_, r) in enumerate(runs)}
    lines: dict[str, list[tuple[int, float, float | None, float | None]]] = defaultdict(list)
    for _, run_id in runs:
        for e, usd in costs[run_id][1].items():
            lines[e].append((index[run_id], usd, None, None))
    lines = {e: lines[e] for e in [*order, *sorted(set(lines) - set(order))] if e in lines}
    caption = "What each run cost per endpoint, from the run's summary.json (cost), USD."
    if len(runs) < MIN_RUNS:
        text = "; ".join(f"{e} ${pts[-1][1]:.4g} in the latest run" for e, pts in lines.items())
        return TrendChart(id="cost", title="Cost per run", metric="cost_usd", caption=caption,
                          sentence=f"{text} ({len(runs)} run{'s' if len(runs) != 1 else ''} with a cost: "
                                   "no chart yet).")
    return TrendChart(id="cost", title="Cost per run", metric="cost_usd", caption=caption,
                      svg=charts.trend_chart(lines, tick_labels([s for s, _ in runs]), {}, "USD per run", "cost",
                                             charts.colour_map(order)))
