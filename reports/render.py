"""Render ``run_dir/report.html`` (one self-contained, offline file) from a composed :class:`~reports.view.ReportView`.

The renderer decides nothing: gate, drift, verdicts, which disagreements are real and which charts are worth
drawing are composed beforehand (:func:`reports.report_view.build_report_view`, called by ``verifier run`` and
``verifier report`` through ``verifier/cli/compose.py``). :func:`render_report` is the convenience for a run folder.

Safety: every value goes through jinja2 autoescaping; the only unescaped inserts are our own SVG charts and our
own script, and a Content-Security-Policy allows nothing else (no network, no other script, no inline event
handlers), so model output that contains markup is shown as text and can never run.
"""

from __future__ import annotations

import base64
import hashlib
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2

from reports.chart_worker import ChartDrawer
from reports.disclosure import DisclosureCard, fingerprint_text, write_cards
from reports.glossary import GLOSSARY, entry, glossary_id, glossary_key
from reports.report_view import VERDICT_COLUMNS, VERDICT_MARKS, build_report_view
from reports.suite_view import MAX_DISAGREEMENTS
from reports.view import ReportView
from verifier.history.gate import Policy
from verifier.records import ExchangeRecord
from verifier.run.store import RecordStore, RunManifest
from verifier.run.summary import RunSummary

if TYPE_CHECKING:
    from verifier.history import DbArg

__all__ = ["GLOSSARY", "MAX_DISAGREEMENTS", "VERDICT_COLUMNS", "VERDICT_MARKS", "load_view", "render_html",
           "render_report", "render_view", "write_report"]


def _template_env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("reports", "templates"),
        autoescape=True,  # every {{ }} is escaped; model text is untrusted
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["fingerprint"] = fingerprint_text
    env.filters["gid"] = glossary_id
    env.filters["in_glossary"] = lambda m: glossary_key(m) in GLOSSARY or entry(m) is not None
    return env


def _script() -> tuple[str, str]:
    """Our inline script and its CSP hash: only this exact script may run in the report."""
    text = resources.files("reports").joinpath("templates/report.js.j2").read_text(encoding="utf-8")
    digest = base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")
    return text, f"'sha256-{digest}'"


def render_view(view: ReportView) -> str:
    """The page's HTML from its view-model (no analysis, no IO)."""
    script, script_hash = _script()
    return _template_env().get_template("report.html.j2").render(
        v=view,
        s=view.summary,
        script=script,
        csp=f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src {script_hash}; "
        "base-uri 'none'; form-action 'none'",
    )


def render_html(summary: RunSummary, *, records: list[ExchangeRecord] | None = None, manifest: Any = None,
                policy: Policy | None = None, db_path: DbArg = None,
                drawer: ChartDrawer | None = None) -> tuple[str, list[DisclosureCard]]:
    """Compose and render in one call (for callers holding typed inputs): the HTML and the disclosure cards."""
    view = build_report_view(summary, records=records, manifest=manifest, policy=policy, db_path=db_path,
                             drawer=drawer)
    return render_view(view), view.cards


def load_view(run_dir: Path, *, db_path: DbArg = None, policy: Policy | None = None,
              drawer: ChartDrawer | None = None) -> ReportView:
    """Read a run folder (summary.json, records.jsonl and manifest.json when present) and compose its view."""
    run_dir = Path(run_dir)
    summary = RunSummary.read(run_dir)
    records: list[ExchangeRecord] = []
    manifest = None
    if (run_dir / "records.jsonl").exists():
        records = RecordStore(run_dir / "records.jsonl", read_only=True).read()
    if (run_dir / "manifest.json").exists():
        manifest = RunManifest.load(run_dir)
    return build_report_view(summary, records=records, manifest=manifest, policy=policy, db_path=db_path,
                             drawer=drawer)


def write_report(run_dir: Path, view: ReportView) -> Path:
    """Write ``report.html`` (atomically) and the disclosure JSONs of ``view`` into ``run_dir``."""
    run_dir = Path(run_dir)
    html = render_view(view)
    write_cards(run_dir, view.cards)
    out = run_dir / "report.html"
    tmp = run_dir / "report.html.tmp"
    tmp.write_text(html, encoding="utf-8")
    tmp.replace(out)
    return out


def render_report(run_dir: Path, *, db_path: DbArg = None, policy: Policy | None = None,
                  drawer: ChartDrawer | None = None) -> Path:
    """Compose and write ``run_dir/report.html`` (and disclosure JSONs); returns the report path.

    ``drawer``: a :class:`ChartDrawer` whose worker process draws the charts (``verifier run`` starts one
    before it measures); None draws them in-process.
    """
    return write_report(run_dir, load_view(run_dir, db_path=db_path, policy=policy, drawer=drawer))
