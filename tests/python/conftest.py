"""pytest setup: use the installed package `solder`, or the module built by scikit-build in the build
tree when SOLDER_PYTHON_PATH names its folder (scripts/test.sh installs into a venv)."""
import os
import sys

path = os.environ.get("SOLDER_PYTHON_PATH")
if path:
    sys.path.insert(0, path)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
