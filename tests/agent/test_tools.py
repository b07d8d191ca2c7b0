"""The agent's tools: schemas, confinement, bash limits, edit semantics, clear errors."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cuda_agent.agent.tools import TOOL_NAMES, ToolConfig, ToolExecutor, cap_text, tool_schemas
from cuda_agent.workspace import Workspace


@pytest.fixture()
def ws(make_workspace) -> Workspace:
    return make_workspace()


@pytest.fixture()
def ex(ws: Workspace):
    executor = ToolExecutor.for_workspace(ws, ToolConfig(bash_timeout_s=20, max_output_chars=2000))
    yield executor
    executor.close()


def test_schemas_are_self_contained_and_shared():
    openai = tool_schemas("openai")
    anthropic = tool_schemas("anthropic")
    assert [s["function"]["name"] for s in openai] == list(TOOL_NAMES)
    assert TOOL_NAMES == ("bash", "read_file", "write_file", "edit_file", "glob", "grep")
    for o, a in zip(openai, anthropic):
        assert o["function"]["parameters"] == a["input_schema"]
        text = json.dumps(o)
        assert "$ref" not in text and "$defs" not in text and '"title"' not in text
        assert o["function"]["parameters"]["additionalProperties"] is False
    edit = anthropic[3]["input_schema"]
    assert edit["required"] == ["path", "edits"]
    assert edit["properties"]["edits"]["items"]["required"] == ["old_string", "new_string"]


def test_paths_cannot_escape(ex: ToolExecutor, ws: Workspace, tmp_path: Path):
    outside = tmp_path / "secret.txt"
    outside.write_text("secret")
    os.symlink(outside, ws.root / "link.txt")
    os.symlink(tmp_path, ws.root / "linkdir")
    for name, args in [("read_file", {"path": "../secret.txt"}), ("read_file", {"path": str(outside)}),
                       ("read_file", {"path": "link.txt"}), ("write_file", {"path": "linkdir/x", "content": "1"}),
                       ("write_file", {"path": "link.txt", "content": "pwned"}),
                       ("grep", {"pattern": "secret", "path": "linkdir"}), ("glob", {"pattern": "../*"})]:
        r = ex.execute(name, args)
        assert not r.ok, (name, args)
    assert outside.read_text() == "secret"
    r = ex.execute("grep", {"pattern": "secret"})  # the symlinked file is not followed out
    assert "no matches" in r.text


def test_protected_files_and_record_refused(ex: ToolExecutor, ws: Workspace):
    for rel in ("model.py", "SKILL.md", "verify.sh", ".cuda_agent/workspace.json"):
        r = ex.execute("write_file", {"path": rel, "content": "x"})
        assert not r.ok and ("protected" in r.error or "record" in r.error)
    assert ws.tampered_files() == []


def test_read_file_ranges(ex: ToolExecutor):
    ex.execute("write_file", {"path": "notes/a.txt", "content": "\n".join(f"line{i}" for i in range(1, 11))})
    r = ex.execute("read_file", {"path": "notes/a.txt", "start_line": 3, "num_lines": 2})
    assert r.ok and r.output.splitlines() == ["3\tline3", "4\tline4"]
    r = ex.execute("read_file", {"path": "notes/a.txt", "start_line": 20})
    assert not r.ok and "10 lines" in r.error
    small = ToolExecutor(ex.root, config=ToolConfig(read_max_lines=4))
    r = small.execute("read_file", {"path": "notes/a.txt"})
    assert "read on with start_line=5" in r.output
    small.close()


def test_edit_file_multi_edits_all_or_nothing(ex: ToolExecutor, ws: Workspace):
    path = ws.root / "kernels" / "k.cpp"
    ex.execute("write_file", {"path": "kernels/k.cpp", "content": "int a;\nint b;\nfloat c;\n"})
    r = ex.execute("edit_file", {"path": "kernels/k.cpp", "edits": [{"old_string": "int", "new_string": "long"}]})
    assert not r.ok and "occurs 2 times" in r.error and "lines 1, 2" in r.error
    r = ex.execute("edit_file", {"path": "kernels/k.cpp", "edits": [
        {"old_string": "float c;", "new_string": "double c;"}, {"old_string": "missing", "new_string": "x"}]})
    assert not r.ok and "edit 2 of 2" in r.error and "not found" in r.error
    assert path.read_text() == "int a;\nint b;\nfloat c;\n"  # nothing applied
    r = ex.execute("edit_file", {"path": "kernels/k.cpp", "edits": [
        {"old_string": "float c;", "new_string": "double c;"},
        {"old_string": "int", "new_string": "long", "replace_all": True}]})
    assert r.ok, r.error
    assert path.read_text() == "long a;\nlong b;\ndouble c;\n"
    r = ex.execute("edit_file", {"path": "kernels/k.cpp", "edits": [{"old_string": "  long a;", "new_string": "x"}]})
    assert "whitespace" in r.error


def test_bad_calls_are_tool_errors(ex: ToolExecutor):
    assert "unknown tool" in ex.execute("rm_rf", {}).error
    assert "not valid JSON" in ex.execute("bash", '{"command": ').error
    r = ex.execute("read_file", {"path": "model.py", "lines": "1-3"})
    assert "lines: unexpected argument" in r.error
    assert "command: Field required" in ex.execute("bash", {}).error
    assert "bad regular expression" in ex.execute("grep", {"pattern": "("}).error
    assert ex.execute("bash", '{"command": "echo ok"}').output.strip() == "ok"  # raw JSON string accepted


def test_bash_cwd_env_timeout_and_cap(ex: ToolExecutor, ws: Workspace, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    scrubbed = ToolExecutor.for_workspace(ws)
    r = scrubbed.execute("bash", {"command": "pwd; echo KEY=${OPENAI_API_KEY:-none}; echo $CUDA_AGENT_CACHE"})
    scrubbed.close()
    assert r.ok and r.output.splitlines()[:2] == [str(ws.root), "KEY=none"]
    assert r.output.splitlines()[2] == str(scrubbed.shell.cache_dir)
    assert scrubbed.shell.cache_dir.name == "agent-shell"  # not the trusted cache itself
    r = ex.execute("bash", {"command": "exit 3"})
    assert r.ok and r.exit_code == 3 and "[exit code 3]" in r.output
    r = ex.execute("bash", {"command": "sleep 30", "timeout_s": 1})
    assert not r.ok and r.timed_out and "timed out" in r.error and r.seconds < 15
    r = ex.execute("bash", {"command": "seq 1 100000"})
    assert r.truncated and len(r.output) <= 2000 and "cut from the middle" in r.output
    assert r.output.startswith("1\n2\n") and r.output.rstrip().endswith("100000")


def test_bash_background_processes_die_with_the_command(ex: ToolExecutor, ws: Workspace):
    r = ex.execute("bash", {"command": "(sleep 3; touch late.txt) & echo started"})
    assert r.ok and "started" in r.output
    import time

    time.sleep(4)
    assert not (ws.root / "late.txt").exists()


def test_bash_writes_confined_where_supported(ex: ToolExecutor, tmp_path: Path):
    if not ex.shell.confinement["writes"].startswith("landlock"):
        pytest.skip("Landlock is not available on this kernel")
    target = tmp_path / "escape.txt"
    trusted = ex.shell.cache_dir.parent  # baselines and build objects the loop's evaluations read
    r = ex.execute("bash", {"command": f"echo x > {target}; mkdir -p {trusted}/baselines; "
                                       f"echo fake > {trusted}/baselines/planted.json; "
                                       "touch inside.txt && echo inside-ok"})
    assert not target.exists() and not (trusted / "baselines" / "planted.json").exists()
    assert "inside-ok" in r.output


def test_cap_text_keeps_head_and_tail():
    text = "A" * 1000 + "B" * 1000
    capped, cut = cap_text(text, 500)
    assert cut and len(capped) <= 500 and capped.startswith("A") and capped.endswith("B")
    assert cap_text("short", 500) == ("short", False)
