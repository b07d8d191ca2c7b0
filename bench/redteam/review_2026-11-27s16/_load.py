"""Load the old (5102a97) versions of the changed modules beside the new ones."""
import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))  # the repo root: tests.conftest etc.


def old(name: str, package: str):
    full = f"{package}.{name}_old"
    if full in sys.modules:
        return sys.modules[full]
    spec = importlib.util.spec_from_file_location(full, HERE / "old" / f"{name}_old.py")
    mod = importlib.util.module_from_spec(spec)
    mod.__package__ = package
    sys.modules[full] = mod
    spec.loader.exec_module(mod)
    return mod
