"""The ``verifier`` command line: one Typer app, every command registered here, statically.

Exit codes: 0 the run ran; 2 usage or input error (bad flag, bad file, key env var unset, 401, unknown model);
3 the run failed (endpoint unreachable, a suite crashed, every exchange of an endpoint failed). Every error is
one line on stderr. ``python -m verifier.cli`` runs the same app as the ``verifier`` console script.
"""

import typer

from reference_engine.cli import serve
from verifier.cli import badge, endpoints_import, fingerprint, history, main, suites

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Check whether LLM endpoints serve the model you think they do.")
app.command()(main.run)
app.command()(main.merge)
app.command()(main.report)
app.add_typer(suites.app, name="suites", help="List suites; import BFCL files.")
app.command(name="serve", help="Serve the built-in reference engine.")(serve)
app.add_typer(history.history_app, name="history", help="Run history and drift.")
app.command(name="gate", help="Pass/fail a run against thresholds.")(history.gate)
app.add_typer(fingerprint.app, name="fingerprint", help="Calibrate quantization fingerprints from endpoints.")
app.command(name="badge", help="Draw an endpoint's disclosure card as an SVG badge.")(badge.badge)
app.add_typer(endpoints_import.app, name="endpoints", help="Endpoints files: import a model's providers.")

__all__ = ["app"]
