import sys
from pathlib import Path

# mitmproxy loads the addon as a script with its folder on sys.path; tests do the same.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "addon"))
