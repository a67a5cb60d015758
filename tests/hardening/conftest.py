"""The hardening proofs (issue 6) reuse the end-to-end harness.

`tests/e2e` (harness.py, scripted_upstream.py) has no `__init__.py`; put it on the
path the way pytest does for its own tests.
"""

import sys
from pathlib import Path

_E2E = str(Path(__file__).resolve().parent.parent / "e2e")
if _E2E not in sys.path:
    sys.path.insert(0, _E2E)
