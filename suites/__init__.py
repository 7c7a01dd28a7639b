"""Suite data and agent environments (imports nothing of ``verifier``).

``SUITES_DIR`` is the one place the verifier learns where the data files lie, so moving a module inside
``verifier/`` never breaks a data path.
"""

from pathlib import Path

SUITES_DIR = Path(__file__).resolve().parent
