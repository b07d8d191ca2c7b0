"""The agent's bash is sealed (issue 15): it sees its workspace and the toolchain, nothing else
of the host. Decoy secrets are planted where a real one could be (host /tmp, home, another
episode, the repository checkout, the trusted cache, /etc/shadow) and must not be readable.

Bubblewrap is a system package the README names (setup installs nothing system-wide): where it
is missing the seal test skips, saying so; the executor's one-line refusal is tested everywhere."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from cuda_agent.agent import shell as shell_mod
from cuda_agent.agent.shell import ShellConfig, ShellUnavailable
from cuda_agent.agent.tools import ToolConfig, ToolExecutor

REPO = Path(__file__).resolve().parents[2]
SEALED = ToolConfig(shell=ShellConfig(seal=True))  # whatever CUDA_AGENT_SEAL says: the seal is what is tested
SECRET = f"decoy-{uuid.uuid4().hex}"


@pytest.fixture()
def decoys(tmp_path: Path, cache_dir: Path):
    home_decoy = Path.home() / f".cuda-agent-decoy-{uuid.uuid4().hex[:8]}"
    paths = {
        "host tmp": tmp_path / "decoy.key",
        "home": home_decoy,
        "other episode": tmp_path / "episodes" / "other" / "workspace" / "secret.txt",
        "trusted cache": cache_dir / f"decoy-{uuid.uuid4().hex[:8]}.key",
    }
    for p in paths.values():
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(SECRET)
    yield paths
    for p in paths.values():
        p.unlink(missing_ok=True)


@pytest.mark.skipif(shell_mod.bwrap_problem() is not None, reason="bubblewrap cannot seal here (a system "
                    "package: apt-get install bubblewrap; README)")
def test_bash_sees_the_workspace_and_toolchain_only(tmp_path: Path, decoys: dict[str, Path]):
    ws = tmp_path / "episodes" / "mine" / "workspace"
    ws.mkdir(parents=True)
    (ws / "mine.txt").write_text("my own file")
    ex = ToolExecutor(ws, config=SEALED)
    try:
        assert ex.shell.confinement["sealed"] == "bubblewrap"
        for where, path in {**decoys, "repository": REPO / "README.md", "shadow": Path("/etc/shadow")}.items():
            out = ex.execute("bash", {"command": f"cat {path}"}).text
            assert "No such file or directory" in out and SECRET not in out, where
        assert ex.execute("bash", {"command": f"ls -A {tmp_path} {tmp_path}/episodes"}).text.split() == [
            f"{tmp_path}:", "episodes", f"{tmp_path}/episodes:", "mine"]  # no other episode, no decoy
        home = ex.execute("bash", {"command": f"ls -A {Path.home()}"}).text
        assert "No such file" in home or set(home.split()) <= {".pyenv"}, home  # at most the toolchain's own folder
        found = ex.execute("bash", {"command": "find / \\( -path /proc -o -path /sys -o -path /dev -o -path /usr \\) "
                                               "-prune -o -name '*decoy*' -print 2>/dev/null; echo end"}).text
        assert found.strip() == "end", found
        assert ex.execute("bash", {"command": "cat mine.txt"}).text == "my own file"
        assert ex.execute("bash", {"command": "echo x > /tmp/t && cat /tmp/t && echo y > $TMPDIR/u && cat $TMPDIR/u"
                                   }).text == "x\ny\n"
        assert ex.execute("bash", {"command": f"echo no > {REPO}/src/x.txt"}).exit_code != 0
        toolchain = ex.execute("bash", {"command": "python -c 'import torch, cuda_agent; print(torch.__version__)' && "
                                        "printf 'int main(){return 0;}' > t.cpp && g++ t.cpp -o t && ./t && echo built"})
        assert toolchain.exit_code == 0 and toolchain.text.rstrip().endswith("built"), toolchain.text
    finally:
        ex.close()


def test_without_bubblewrap_the_shell_refuses_with_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(shell_mod, "_BWRAP_OK", {})
    monkeypatch.setattr(shell_mod.shutil, "which", lambda name, *a, **k: None)
    with pytest.raises(ShellUnavailable, match="apt-get install bubblewrap"):
        ToolExecutor(tmp_path, config=SEALED)


def test_the_operator_turns_the_seal_off_by_name_only(monkeypatch: pytest.MonkeyPatch):
    """CUDA_AGENT_SEAL=0 changes every default (the tool's, the agent's, training's); an explicit
    setting wins; unset or anything else, bash is sealed. A missing bubblewrap changes nothing."""
    from cuda_agent.agent.loop import AgentConfig
    from cuda_agent.train.config import RLConfig

    monkeypatch.setattr(shell_mod, "_BWRAP_OK", {"path": None, "problem": "no bubblewrap"})
    for value, sealed in [(None, True), ("1", True), ("yes", True), ("0", False), ("off", False), (" False ", False)]:
        if value is None:
            monkeypatch.delenv(shell_mod.SEAL_ENV, raising=False)
        else:
            monkeypatch.setenv(shell_mod.SEAL_ENV, value)
        assert (ShellConfig().seal, AgentConfig().seal_shell, RLConfig().seal_shell) == (sealed,) * 3, value
    assert ShellConfig(seal=True).seal and AgentConfig(seal_shell=True).tool_config().shell.seal
