"""The ``verifier`` Typer app: every command registered here, statically (the package exposes it as
``verifier.cli.app``)."""

import typer

from reference_engine.cli import serve
from verifier.cli.badge import badge
from verifier.cli.endpoints_import import app as endpoints_app
from verifier.cli.fingerprint import app as fingerprint_app
from verifier.cli.history import gate, history_app
from verifier.cli.main import merge, report, run
from verifier.cli.suites import app as suites_app

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Check whether LLM endpoints serve the model you think they do.")
app.command()(run)
app.command()(merge)
app.command()(report)
app.add_typer(suites_app, name="suites", help="List suites; import BFCL files.")
app.command(name="serve", help="Serve the built-in reference engine.")(serve)
app.add_typer(history_app, name="history", help="Run history and drift.")
app.command(name="gate", help="Pass/fail a run against thresholds.")(gate)
app.add_typer(fingerprint_app, name="fingerprint", help="Calibrate quantization fingerprints from endpoints.")
app.command(name="badge", help="Draw an endpoint's disclosure card as an SVG badge.")(badge)
app.add_typer(endpoints_app, name="endpoints", help="Endpoints files: import a model's providers.")
