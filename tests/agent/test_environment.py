"""The episode environment every driver shares (agent loop, verl's token episode, TRL): calls
that cannot run are answered and counted, the verdict comes from the evaluator it is given,
and the workspace it made is removed on close unless kept. And the journal it is recorded in:
a torn last line is cut before the next append, so the turns after a crash stay readable."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from cuda_agent.agent.environment import Environment
from cuda_agent.agent.journal import Journal, load_journal
from cuda_agent.agent.shell import ShellConfig
from cuda_agent.agent.tools import ToolConfig
from cuda_agent.agent.trajectory import TaskInfo, ToolCall, Trajectory, Turn
from cuda_agent.evaluation import EvalConfig, EvalResult
from cuda_agent.storage import StoreError
from cuda_agent.tasks import Task
from tests.conftest import RELU_TASK

RELU = Task.from_source(RELU_TASK, name="relu")
UNSEALED = ToolConfig(shell=ShellConfig(seal=False))


def _verdict(reward: int) -> EvalResult:
    return EvalResult(task="relu", task_hash="h", backend="cpu", reward=reward, correct=reward > 0)


def _fresh(tmp_path: Path, **kw) -> Environment:
    return Environment.fresh(RELU, "cpu", workdir=tmp_path, tool_config=UNSEALED, **kw)


def test_calls_that_cannot_run_are_answered_with_errors_and_counted(tmp_path: Path):
    with _fresh(tmp_path) as env:
        bad_json = env.execute(ToolCall(id="a", name="bash", raw_arguments="{oops", parse_error="not valid JSON"))
        nameless = env.execute(ToolCall(id="b", name="", arguments={"command": "ls"}))
        unknown = env.execute(ToolCall(id="c", name="rm_rf", arguments={}))
        ran = env.execute(ToolCall(id="d", name="bash", arguments={"command": "echo hi > note.txt && cat note.txt"}))
    assert not bad_json.ok and "not valid JSON; the call was not run" in bad_json.text
    assert not nameless.ok and "needs a tool name" in nameless.text and "bash" in nameless.text
    assert not unknown.ok and "unknown tool 'rm_rf'" in unknown.text
    assert ran.ok and ran.text.strip() == "hi"
    assert (env.calls, env.errors) == (4, 3)


def test_a_fresh_workspace_is_removed_on_close_unless_kept(tmp_path: Path):
    with _fresh(tmp_path / "gone") as env:
        assert (env.ws.root / "model_new.py").is_file() and env.ws.root.is_relative_to(tmp_path / "gone")
    assert not any((tmp_path / "gone").iterdir())
    with _fresh(tmp_path / "kept", keep=True) as env:
        env.execute(ToolCall(id="a", name="write_file", arguments={"path": "kernels/k.cpp", "content": "// k"}))
    assert (env.ws.root / "kernels" / "k.cpp").read_text() == "// k"


def test_a_given_workspace_stays_and_failed_setup_leaves_nothing(tmp_path: Path, monkeypatch):
    with _fresh(tmp_path, keep=True) as first:
        pass
    with Environment(first.ws, tool_config=UNSEALED) as env:  # e.g. the agent loop's episodes/<id>/workspace
        env.execute(ToolCall(id="a", name="bash", arguments={"command": "touch kept.txt"}))
    assert (first.ws.root / "kept.txt").is_file()

    from cuda_agent.agent import shell

    def missing() -> str:
        raise shell.ShellUnavailable("the sealed bash tool needs bubblewrap")

    monkeypatch.setattr(shell, "bwrap_path", missing)
    monkeypatch.delenv(shell.SEAL_ENV, raising=False)  # sealed by default, as on a machine set up in full
    with pytest.raises(shell.ShellUnavailable):
        Environment.fresh(RELU, "cpu", workdir=tmp_path / "sealed")
    assert not any((tmp_path / "sealed").iterdir())


def test_the_verdict_comes_from_the_evaluator_given_sync_or_async(tmp_path: Path):
    seen: list[EvalConfig] = []

    def judge(ws, config):  # noqa: ANN001
        seen.append(config)
        return _verdict(2)

    async def pool(ws, config):  # noqa: ANN001
        return _verdict(3)

    cfg = EvalConfig(backend="cpu", compile_mode=None)
    with _fresh(tmp_path, evaluator=judge, eval_config=cfg) as env:
        assert env.evaluate().reward == 2 and seen == [cfg]
        other = cfg.model_copy(update={"measure": False})
        assert env.evaluate(other).reward == 2 and seen[-1] is other
        assert asyncio.run(env.aevaluate()).reward == 2
    with _fresh(tmp_path, evaluator=pool) as env:
        assert asyncio.run(env.aevaluate()).reward == 3
        with pytest.raises(TypeError, match="aevaluate"):
            env.evaluate()


def test_the_real_verdict_of_an_untouched_workspace(tmp_path: Path, fast_config: EvalConfig):
    with _fresh(tmp_path, eval_config=fast_config) as env:
        result = env.evaluate()
    assert result.reward == -1 and not result.correct


def _trajectory() -> Trajectory:
    return Trajectory(episode_id="ep", task=TaskInfo(name="relu", content_hash="h"), backend="cpu",
                      policy={}, config={}, started_at="now", workdir=".")


def test_journal_cuts_a_torn_line_before_appending_and_reads_in_one_pass(tmp_path: Path):
    path = tmp_path / "journal.jsonl"
    traj = _trajectory()
    first = Journal(path)
    first.start(traj)
    traj.turns.append(Turn(index=0))
    first.turn(traj, 0)
    first._writer.close()  # a crash: the process is gone, its lock with it
    with path.open("a") as fh:
        fh.write('{"type": "turn", "turn": 1, "mess')  # killed mid-write
    assert len(load_journal(path).trajectory.turns) == 1  # the torn line is ignored

    resumed = Journal(path)
    resumed.mark(traj)
    traj.turns.append(Turn(index=1))
    resumed.turn(traj, 1)
    resumed.end(traj)
    state = load_journal(path)
    assert [t.index for t in state.trajectory.turns] == [0, 1] and state.ended == traj.stop_reason

    with path.open("a") as fh:
        fh.write('{"type": "turn", "turns": [{"index": "not a number"}]}\n')
    with pytest.raises(StoreError, match="not a journal event"):
        load_journal(path)
