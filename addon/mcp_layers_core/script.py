"""Where the addon script is: the file to give `mitmdump -s`.

The script (`mcp_layers.py`) is installed as a top-level module beside this package, so
a plain `pip install` carries it; in a checkout (editable install) it is addon/mcp_layers.py.
Found without importing it: importing it would import mitmproxy.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

MODULE = "mcp_layers"


def path() -> Path:
    """The addon script's absolute path. Raises LookupError when it is not installed."""
    spec = importlib.util.find_spec(MODULE)
    if spec is None or spec.origin is None:
        raise LookupError(f"the addon script ({MODULE}.py) is not installed")
    return Path(spec.origin).resolve()
