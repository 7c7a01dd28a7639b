"""``python -m verifier.cli``: the same entry as the ``verifier`` console script."""

from verifier.cli.entry import main

main()
