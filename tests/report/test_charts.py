"""Charts are inline SVG inserted unescaped, so any text they carry must come out XML-escaped."""

from __future__ import annotations

from reports import charts
from verifier.records import Interval
from verifier.run.summary import Series

NASTY = '<script>alert(1)</script>$x$ & "q"'


def test_names_in_charts_are_escaped_and_not_tex() -> None:
    svgs = [
        charts.rates_chart([("schema_accuracy", NASTY, Interval(value=0.9, low=0.8, high=0.95, n=100))], "k1"),
        charts.series_chart(NASTY, {NASTY: Series(name=NASTY, x=[0, 1, 2], y=[1, 0.9, 0.8], low=[1, 0.8, 0.7],
                                                  high=[1, 1, 0.9], x_label=NASTY, y_label=NASTY)}, "k2"),
        charts.latency_chart({NASTY: [0.1, 0.2, 0.3]}, "k3"),
        charts.history_chart({NASTY: [("2026-01-01", 0.5, 0.4, 0.6), ("2026-01-02", 0.6, None, None)]}, NASTY, "k4"),
    ]
    for svg in svgs:
        assert svg.startswith("<svg ") and svg.rstrip().endswith("</svg>")
        assert "<script" not in svg
        assert "&lt;script&gt;alert(1)&lt;/script&gt;$x$" in svg  # shown literally: escaped, and no TeX parsing
        assert "<?xml" not in svg and "<!DOCTYPE" not in svg


def test_chart_ids_do_not_collide_between_charts() -> None:
    import re

    a = charts.latency_chart({"e": [0.1, 0.2]}, "one")
    b = charts.latency_chart({"e": [0.1, 0.2]}, "two")
    ids_a, ids_b = set(re.findall(r'id="([^"]+)"', a)), set(re.findall(r'id="([^"]+)"', b))
    assert ids_a and not (ids_a & ids_b)
