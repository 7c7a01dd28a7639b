"""The ``verifier`` command line: the Typer app (``verifier.cli:app``) and ``python -m verifier.cli``."""

from verifier.cli.main import app

__all__ = ["app"]
