"""Suite kinds, one package each with the same shape: ``kind.py`` (load and run, the SuiteKind the registry lists),
``scoring.py`` (records -> results), and what only that kind needs."""
