"""Load the addon the way mitmproxy's `-s` does: as the script module `mcp_layers`, from its
file, so `import mcp_layers` in the tests gets the very module mitmdump runs."""

import importlib.util
import sys
from pathlib import Path

ADDON = Path(__file__).resolve().parents[2] / "addon" / "mcp_layers.py"

if "mcp_layers" not in sys.modules:
    _spec = importlib.util.spec_from_file_location("mcp_layers", ADDON)
    assert _spec is not None and _spec.loader is not None, ADDON
    _module = importlib.util.module_from_spec(_spec)
    sys.modules["mcp_layers"] = _module
    _spec.loader.exec_module(_module)
