"""Load the old (5102a97) versions of the changed modules beside the new ones, read from git
(`git show 5102a97:src/cuda_agent/<package path>/<name>.py`), not kept as copies."""
import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(ROOT))  # the repo root: tests.conftest etc.
OLD = "5102a97"
_DIR = Path(tempfile.mkdtemp(prefix="old-modules-"))


def old(name: str, package: str):
    full = f"{package}.{name}_old"
    if full in sys.modules:
        return sys.modules[full]
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{OLD}:src/{package.replace('.', '/')}/{name}.py"],
                            check=True, capture_output=True, text=True).stdout
    path = _DIR / f"{name}_old.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(full, path)
    mod = importlib.util.module_from_spec(spec)
    mod.__package__ = package
    sys.modules[full] = mod
    spec.loader.exec_module(mod)
    return mod
