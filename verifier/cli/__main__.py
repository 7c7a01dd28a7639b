"""``python -m verifier.cli``: the same app as the ``verifier`` console script."""

from verifier.cli import app

app()
