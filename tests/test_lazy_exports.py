"""Package names load on first use: importing the packages (and so the CLI) does not import torch,
and a public name resolves to the object its submodule defines."""

from __future__ import annotations

import subprocess
import sys

PACKAGES = ("cuda_agent", "cuda_agent.agent", "cuda_agent.evaluation", "cuda_agent.data", "cuda_agent.benchmark")


def test_packages_import_without_torch() -> None:
    code = f"import sys\nfor p in {PACKAGES!r}: __import__(p)\nprint('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_names_resolve_to_their_submodule_objects() -> None:
    import cuda_agent
    import cuda_agent.data as data
    from cuda_agent.data.similarity import fingerprint
    from cuda_agent.tasks import load_tasks

    assert cuda_agent.load_tasks is load_tasks
    assert data.fingerprint is fingerprint
    assert "Task" in dir(cuda_agent)
    try:
        cuda_agent.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("an unknown name must raise AttributeError")


def test_no_export_shares_a_submodule_name() -> None:
    """Importing a submodule binds its name on the package, so an export of the same name would be
    the object or the module depending on import order."""
    import importlib
    import pkgutil

    for package in PACKAGES:
        mod = importlib.import_module(package)
        submodules = {m.name for m in pkgutil.iter_modules(mod.__path__)}
        assert not submodules & set(mod.__all__), package
