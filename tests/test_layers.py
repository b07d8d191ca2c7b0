"""The package's layers and its freedom from import cycles, as declared in pyproject.toml."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_hold():
    """import-linter reads `[tool.importlinter]`; a broken contract names the offending import."""
    run = subprocess.run([sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command; "
                          "sys.exit(lint_imports_command(['--no-cache']))"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "0 broken" in run.stdout


def test_a_layer_violation_is_reported(tmp_path: Path):
    """The check can fail: a config that forbids evaluation from importing isolation breaks."""
    config = tmp_path / "contracts.ini"
    config.write_text("[importlinter]\nroot_package = cuda_agent\n\n[importlinter:contract:upside-down]\n"
                      "name = upside down\ntype = layers\nlayers =\n    cuda_agent.isolation\n    cuda_agent.evaluation\n")
    run = subprocess.run([sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command; "
                          f"sys.exit(lint_imports_command(['--no-cache', '--config', {str(config)!r}]))"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode != 0
    assert "cuda_agent.evaluation" in run.stdout and "BROKEN" in run.stdout
