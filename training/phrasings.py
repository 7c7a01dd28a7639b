"""The training phrasings of the tool catalogue: ``training/train_phrasings.json``.

Why they live here and not in ``suites/``: only training reads them, and the shipped package should carry
only what a run uses. They have the shape of the evaluation phrasings (``suites.toolcall.catalog.Phrasings``)
and never share a string with them (``tests/model/test_catalog_train_phrasings.py``), so the built-in suites
measure a trained model on wordings it has never seen. Pass :data:`TRAIN_PHRASINGS` to the catalogue's
generators (``generate_cases(seed, n, TRAIN_PHRASINGS)``) for training cases.
"""

from __future__ import annotations

from pathlib import Path

from suites.toolcall.catalog import Phrasings, load_phrasings

TRAIN_PHRASINGS_FILE = Path(__file__).resolve().parent / "train_phrasings.json"
TRAIN_PHRASINGS: Phrasings = load_phrasings(TRAIN_PHRASINGS_FILE)
