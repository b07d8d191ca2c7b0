"""Loop pieces without a model server: triggers, best-state snapshots, context window, text
call parsing, retries, batch resume and the `optimize` command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cuda_agent.agent import AgentConfig, PolicyConfig, ScriptedPolicy, run_batch
from cuda_agent.agent.batch import TRAJECTORIES, episode_id
from cuda_agent.agent.context import ContextExhausted, ContextWindow
from cuda_agent.agent.policies import PolicyError, TransientError, parse_tool_calls, reply, with_retries
from cuda_agent.agent.snapshots import BestState, candidate_hash, eval_trigger, improves, restore_snapshot
from cuda_agent.agent.tools import TOOLS
from cuda_agent.agent.trajectory import Message, ToolCall, load_trajectories
from cuda_agent.evaluation import EvalConfig, EvalResult
from cuda_agent.tasks import Task
from tests.conftest import RELU_TASK


def _result(reward: int, s_compile: float | None = None, s_eager: float | None = None) -> EvalResult:
    return EvalResult(task="t", task_hash="h", backend="cpu", reward=reward, correct=reward > 0,
                      speedup_vs_compile=s_compile, speedup_vs_eager=s_eager)


@pytest.mark.parametrize("command,expected", [
    ("./verify.sh", "verify"), ("cd . && ./compile.sh && ./verify.sh 2>&1 | tail", "verify"),
    ("./profile.sh --json", "profile"), ("./verify.sh; ./profile.sh", "profile"), ("bash profile.sh", "profile"),
    ("cuda-agent evaluate . --no-timing", "verify"), ("python -m cuda_agent evaluate .", "profile"),
    ("./compile.sh", None), ("cat verify.sh.bak", None), ("echo reward 3", None), ("ls myprofile.shx", None),
])
def test_eval_trigger(command: str, expected: str | None):
    assert eval_trigger(command) == expected


def test_best_state_keeps_the_best_not_the_last(tmp_path: Path):
    ws = tmp_path / "ws"
    (ws / "kernels").mkdir(parents=True)
    best = BestState(ws, tmp_path / "best")

    def state(text: str) -> str:
        (ws / "model_new.py").write_text(text)
        (ws / "kernels" / "k.cpp").write_text(f"// {text}")
        return candidate_hash(ws)

    h1 = state("v1")
    assert not best.consider(_result(-1), 0, h1)  # an incorrect state is never "best"
    assert best.consider(_result(1), 1, h1)
    h2 = state("v2")
    assert best.consider(_result(2, 1.0, 1.3), 2, h2)
    h3 = state("v3")
    assert not best.consider(_result(1, 0.9, 0.95), 3, h3)  # worse: kept v2
    h4 = state("v4")
    assert not best.consider(_result(3, 1.2, 1.5), 4, h3)  # result for another state than the current one
    assert best.best is not None and best.best.turn == 2
    assert (tmp_path / "best" / "model_new.py").read_text() == "v2"
    assert (tmp_path / "best" / "kernels" / "k.cpp").read_text() == "// v2"
    assert best.consider(_result(3, 1.2, 1.5), 5, h4)
    assert (tmp_path / "best" / "model_new.py").read_text() == "v4"
    restored = tmp_path / "restored"
    assert sorted(restore_snapshot(best.best, restored)) == ["kernels/k.cpp", "model_new.py"]
    assert (restored / "kernels" / "k.cpp").read_text() == "// v4"


def test_improves_ordering():
    assert improves(_result(1), None) and not improves(_result(-1), None)
    assert improves(_result(2, 1.0, 1.2), _result(1, 0.8, 1.0))
    assert improves(_result(1, 0.9), _result(1, 0.8))
    assert improves(_result(1, None, 1.1), _result(1))  # timed beats verified-only
    assert not improves(_result(1), _result(1, 0.9))


def test_context_window_compacts_old_turns_first():
    win = ContextWindow(2000, keep_recent_turns=1)
    win.add(Message(role="system", content="S" * 400))
    win.add(Message(role="user", content="task"))
    for i in range(6):
        win.add(Message(role="assistant", content=f"turn {i}",
                        tool_calls=[ToolCall(id=f"c{i}", name="write_file",
                                             arguments={"path": "k.cpp", "content": "x" * 3000})]))
        win.add(Message(role="tool", content=f"out{i} " + "y" * 3000, tool_call_id=f"c{i}", name="write_file"))
    comp = win.fit(turn=6)
    assert comp is not None and comp.tokens_after <= 2000 < comp.tokens_before
    roles = [m.role for m in win.messages]
    assert roles[:2] == ["system", "user"] and roles[-2:] == ["assistant", "tool"]
    for i, m in enumerate(win.messages):  # every tool result still follows its call
        if m.role == "tool":
            prev = win.messages[i - 1]
            assert prev.role == "tool" or m.tool_call_id in {c.id for c in prev.tool_calls}
    assert win.messages[-2].content == "turn 5"
    if comp.turns_dropped:
        assert "oldest turn(s) were removed" in win.messages[1].content
    assert win.fit(turn=7) is None


def test_context_window_caps_new_outputs_and_reports_exhaustion():
    win = ContextWindow(1000, tools=TOOLS)
    shown = win.add(Message(role="tool", content="z" * 50_000, tool_call_id="c", name="bash"))
    assert len(shown.content) < 5000 and "cut from the middle" in shown.content
    win2 = ContextWindow(600)
    win2.add(Message(role="system", content="S" * 10_000))
    with pytest.raises(ContextExhausted):
        win2.fit(turn=0)


def test_parse_text_tool_calls():
    prose, calls = parse_tool_calls('Plan.\n<tool_call>{"name": "bash", "arguments": {"command": "ls"}}</tool_call>\n'
                                    '<tool_call>```json\n{"name": "glob", "arguments": "{\\"pattern\\": \\"*\\"}"}\n```'
                                    '</tool_call><tool_call>{"name": "grep", "arguments": {oops}</tool_call>'
                                    '<tool_call>{"name": "read_file", "arguments": {"path": "a"}}')
    assert prose == "Plan."
    assert [c.name for c in calls] == ["bash", "glob", "grep", "read_file"]
    assert calls[0].arguments == {"command": "ls"} and calls[1].arguments == {"pattern": "*"}
    assert calls[2].arguments is None and "not valid JSON" in calls[2].parse_error
    assert calls[3].arguments == {"path": "a"}  # an unclosed final block still counts


def test_with_retries_backoff_and_give_up():
    cfg = PolicyConfig(max_retries=2, backoff_s=1.0)
    delays: list[float] = []
    attempts = iter([TransientError("500"), TransientError("503"), "ok"])

    def flaky() -> str:
        x = next(attempts)
        if isinstance(x, Exception):
            raise x
        return x

    assert with_retries(flaky, cfg, sleep=delays.append) == ("ok", 2)
    assert len(delays) == 2 and 0.5 <= delays[0] <= 1.0 and 1.0 <= delays[1] <= 2.0

    def always() -> str:
        raise TransientError("HTTP 500: boom")

    with pytest.raises(PolicyError, match="gave up after 3 attempt"):
        with_retries(always, cfg, sleep=delays.append)


@pytest.fixture()
def quick_config(fast_config: EvalConfig) -> AgentConfig:
    return AgentConfig(backend="cpu", max_turns=3, eval=fast_config)


def test_batch_resume_skips_finished_and_retries_failed(tmp_path: Path, quick_config: AgentConfig):
    a = Task.from_source(RELU_TASK, name="a")
    b = Task.from_source(RELU_TASK + "\n# b\n", name="b")

    class Flaky(ScriptedPolicy):
        """Fails on task b (its source, in the system prompt, ends with '# b') while `down`."""

        down = True

        def complete(self, messages, tools):  # noqa: ANN001
            if self.down and "# b" in messages[0].content:
                raise PolicyError("endpoint down")
            return super().complete(messages, tools)

    pol = Flaky(steps=[])
    s1 = run_batch([a, b], pol, quick_config, tmp_path / "out")
    assert (s1.finished, s1.failed, s1.skipped) == (1, 1, 0)
    pol.down = False
    s2 = run_batch([a, b], pol, quick_config, tmp_path / "out")
    assert (s2.finished, s2.failed, s2.skipped) == (2, 0, 1)
    records = load_trajectories(tmp_path / "out" / TRAJECTORIES)
    assert [r.episode_id for r in records] == [episode_id(a, 0), episode_id(b, 0), episode_id(b, 0)]
    assert [r.stop_reason for r in records] == ["done", "policy_error", "done"]
    assert s2.rewards == {"-1": 2} and s2.pass_rate == 0.0


def test_optimize_cli_scripted_and_resume(tmp_path: Path, cache_dir: Path):
    from cuda_agent.cli import app

    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"content": "look", "tool_calls": [{"name": "bash",
                                                                      "arguments": {"command": "ls kernels"}}]},
                                  {"content": "done"}]))
    args = ["optimize", "swish", "--backend", "cpu", "--script", str(script), "--out", str(tmp_path / "out"),
            "--no-compile-baseline", "--trials", "1", "--max-turns", "4"]
    runner = CliRunner()
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    assert "agent results" in r.output and "pass rate" in r.output and "-1: 1" in r.output
    r = runner.invoke(app, args)
    assert "1 finished episode(s) skipped" in r.output
    records = load_trajectories(tmp_path / "out" / TRAJECTORIES)
    assert len(records) == 1 and records[0].tool_calls[0].ok and records[0].policy["kind"] == "scripted"
    r = runner.invoke(app, ["optimize", "no-such-task-xyz", "--backend", "cpu", "--script", str(script)])
    assert r.exit_code == 2 and "error" in r.output


def test_resolve_policy_defaults_to_the_smoke_test_model(monkeypatch):
    from cuda_agent.agent.cli import resolve_policy

    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    p = resolve_policy(None, None, None, None, "native", None, None, 60, 1, None)
    assert p.kind == "local" and p.smoke_test and p.tool_format == "text" and p.max_tokens == 512
    p = resolve_policy(None, "m", "http://127.0.0.1:9/v1", None, "native", None, None, 60, 1, None)
    assert p.kind == "openai" and not p.smoke_test and p.api_key_env == "OPENAI_API_KEY"
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-very-secret")
    assert resolve_policy(None, "claude", None, None, "native", None, None, 60, 1, None).kind == "anthropic"
    assert "sk-very-secret" not in json.dumps(resolve_policy(None, "claude", None, None, "native", None, None, 60, 1,
                                                None).describe())


def test_nudges_remind_an_agent_that_stops_early(tmp_path: Path, quick_config: AgentConfig):
    from cuda_agent.agent import run_episode
    from cuda_agent.agent.prompts import NUDGE_MESSAGE

    task = Task.from_source(RELU_TASK, name="relu")
    traj = run_episode(task, ScriptedPolicy(steps=[reply("hi"), reply("hello")]),
                       quick_config.model_copy(update={"nudges": 1, "max_turns": 5}), tmp_path / "ep")
    assert traj.stop_reason == "done" and len(traj.turns) == 2
    assert [m.content for m in traj.messages if m.role == "user"][1:] == [NUDGE_MESSAGE]
    traj = run_episode(task, ScriptedPolicy(steps=[reply("hi")]), quick_config, tmp_path / "ep2")
    assert len(traj.turns) == 1  # default: the paper's behaviour, stop at once


def test_scripted_policy_replays_then_finishes():
    pol = ScriptedPolicy(steps=[reply("a", ("bash", {"command": "ls"})), lambda msgs: reply(f"{len(msgs)} msgs")])
    assert pol.complete([], []).tool_calls[0].name == "bash"
    assert pol.complete([Message(role="user", content="x")], []).content == "1 msgs"
    assert pol.complete([], []).content == "done" and not pol.complete([], []).tool_calls


def test_batch_worker_pool_and_infrastructure_errors(tmp_path: Path, quick_config: AgentConfig):
    script = tmp_path / "s.json"
    script.write_text(json.dumps([{"content": "", "tool_calls": [{"name": "glob", "arguments": {"pattern": "*"}}]}]))
    tasks = [Task.from_source(RELU_TASK + f"\n# {i}\n", name=f"t{i}") for i in range(3)]
    out = tmp_path / "out"
    (out / "episodes").mkdir(parents=True)
    (out / "episodes" / episode_id(tasks[2], 0)).write_text("a file where the episode folder should be")
    s = run_batch(tasks, PolicyConfig(kind="scripted", script=str(script)), quick_config, out, workers=2)
    assert (s.finished, s.failed) == (2, 1)
    records = {r.episode_id: r for r in load_trajectories(out / TRAJECTORIES)}
    bad = records[episode_id(tasks[2], 0)]
    assert bad.stop_reason == "error" and not bad.finished and bad.error
    good = records[episode_id(tasks[0], 0)]
    assert good.stop_reason == "done" and good.tool_calls[0].ok and good.final is not None


def test_run_in_workspace_follows_the_benchmark_convention(tmp_path: Path, cache_dir: Path, fast_config: EvalConfig):
    from cuda_agent.agent import policy_config, run_in_workspace
    from cuda_agent.workspace import create_workspace

    ws = create_workspace(Task.from_source(RELU_TASK, name="relu"), tmp_path / "ws", "cpu", cache_dir=cache_dir)
    script = tmp_path / "s.json"
    script.write_text(json.dumps([{"content": "", "tool_calls": [{"name": "write_file", "arguments": {
        "path": "kernels/note.txt", "content": "hello"}}]}, {"content": "done"}]))
    verify_only = fast_config.model_copy(update={"measure": False})
    traj = run_in_workspace(task=ws.task, workspace=ws.root, backend="cpu", config=verify_only,
                            policy=f"scripted:{script}", max_turns=5)
    assert traj.stop_reason == "done" and len(traj.turns) == 2
    assert (ws.root / "kernels" / "note.txt").read_text() == "hello"  # it worked in the given workspace
    assert traj.final is not None and traj.final.stage == "guard"  # judged in that workspace: the starter is no kernel
    assert traj.workdir == str(ws.root.parent / f"{ws.root.name}.agent")  # best states go beside the workspace
    assert traj.config["max_turns"] == 5
    assert policy_config("openai:Qwen/Qwen3-8B", base_url="http://x/v1").model_dump(
        include={"kind", "model", "base_url", "api_key_env"}) == {
        "kind": "openai", "model": "Qwen/Qwen3-8B", "base_url": "http://x/v1", "api_key_env": "OPENAI_API_KEY"}
    assert policy_config("local").smoke_test and not policy_config("local:/m.gguf").smoke_test
    with pytest.raises(ValueError, match="backend"):
        run_in_workspace(task=ws.task, workspace=ws.root, backend="cuda", policy=f"scripted:{script}")


def test_context_window_with_an_exact_counter_counts_each_text_once():
    seen: list[str] = []

    def counter(text: str) -> int:
        seen.append(text)
        return len(text.split())

    win = ContextWindow(1000, tools=TOOLS, counter=counter)
    for i in range(50):
        win.add(Message(role="tool", content=f"word {i} " * 20, tool_call_id="c", name="bash"))
    first = win.tokens()
    assert first == win.tokens() and first > 50 * 40
    assert len(seen) == 51  # the schemas once, each message once, however often tokens() runs
