"""The agent as people run it (issue 15): retries start clean, tool output is never empty or
junk, endpoints that stall or ask to wait, budgets, a user's system prompt, the best state
delivered when the last is broken, turns journaled as they happen and a crashed episode resumed
mid-way, the live board, and the run lock."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Sequence

import pytest

from cuda_agent.isolation.processes import RunBusy, RunLock
from cuda_agent.agent import AgentConfig, PolicyConfig, ScriptedPolicy, run_batch, run_episode
from cuda_agent.agent.batch import TRAJECTORIES, BatchSummary, episode_id
from cuda_agent.agent.journal import JOURNAL, load_journal
from cuda_agent.agent.live import JournalBoard
from cuda_agent.agent.policies import PolicyError, PolicyReply, TransientError, reply, with_retries
from cuda_agent.agent.policies.base import Policy, make_policy
from cuda_agent.agent.tools import ToolExecutor
from cuda_agent.agent.trajectory import Usage, load_trajectories
from cuda_agent.evaluation import EvalConfig
from cuda_agent.tasks import Task
from tests.conftest import RELU_BINDING, RELU_KERNEL, RELU_MODEL_NEW, RELU_TASK

REPO = Path(__file__).resolve().parents[2]
RELU = Task.from_source(RELU_TASK, name="relu")


@pytest.fixture()
def quick(fast_config: EvalConfig) -> AgentConfig:
    return AgentConfig(backend="cpu", max_turns=6, eval=fast_config)


class ByTurn(Policy):
    """Replies chosen by how many assistant turns the conversation already holds, so a fresh
    process continuing a journaled episode picks up the script where the crash left it."""

    kind = "scripted"

    def __init__(self, steps: Sequence[Any], config: PolicyConfig | None = None):
        super().__init__(config or PolicyConfig(kind="scripted"))
        self.steps = list(steps)

    def complete(self, messages, tools):  # noqa: ANN001
        i = sum(m.role == "assistant" for m in messages)
        step = self.steps[i] if i < len(self.steps) else reply("done")
        return step(messages) if callable(step) else step.model_copy(deep=True)


def write(path: str, content: str) -> tuple[str, dict]:
    return ("write_file", {"path": path, "content": content})


# ---- a retried episode starts clean ------------------------------------------------------------
def test_retried_episode_starts_from_a_clean_workspace(tmp_path: Path, quick: AgentConfig):
    def crash(messages):  # noqa: ANN001
        raise RuntimeError("the loop hit a bug")

    first = ByTurn([reply("", write("kernels/junk.cpp", "// attempt 1")), crash])
    s = run_batch([RELU], first, quick, tmp_path / "out")
    assert s.failed == 1
    ep = tmp_path / "out" / "episodes" / episode_id(RELU, 0)
    assert (ep / "workspace" / "kernels" / "junk.cpp").is_file()
    (ep / "best").mkdir(exist_ok=True)
    (ep / "best" / "model_new.py").write_text("# a best state from attempt 1")

    seen: list[str] = []

    def look(messages):  # noqa: ANN001
        seen.extend(sorted(p.name for p in (ep / "workspace" / "kernels").iterdir()))
        return reply("done")

    s = run_batch([RELU], ByTurn([look]), quick, tmp_path / "out")
    assert s.finished == 1 and seen == []
    assert not (ep / "best").exists()


# ---- tool output ---------------------------------------------------------------------------------
def test_tool_output_is_never_empty_and_never_binary_junk(tmp_path: Path, cache_dir: Path):
    ex = ToolExecutor(tmp_path)
    try:
        assert ex.execute("bash", {"command": "true"}).text == "(no output)"
        binary = ex.execute("bash", {"command": "head -c 4096 /usr/bin/bash"}).text
        assert binary.startswith("[binary output, 4096 bytes") and "7f 45 4c 46" in binary
        colored = ex.execute("bash", {"command": r"printf '\033[31mred\033[0m ok\a\n'"}).text
        assert colored == "red ok\\x07\n"
    finally:
        ex.close()


# ---- endpoints ---------------------------------------------------------------------------------
class Endpoint:
    """A chat-completions server on 127.0.0.1 answering from a script of (status, headers, body)."""

    def __init__(self, script: list[tuple[int, dict[str, str], dict[str, Any]]]):
        self.script, self.times = list(script), []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers["Content-Length"]))
                outer.times.append(time.monotonic())
                status, headers, body = outer.script.pop(0)
                data = json.dumps(body).encode()
                self.send_response(status)
                for k, v in {"Content-Type": "application/json", "Content-Length": str(len(data)), **headers}.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


OK_BODY = {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
           "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "hi"}}],
           "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}
BUSY = {"error": {"message": "slow down", "type": "rate_limit"}}


def test_retry_after_is_honoured():
    server = Endpoint([(429, {"Retry-After": "1"}, BUSY), (200, {}, OK_BODY)])
    try:
        pol = make_policy(PolicyConfig(kind="openai", model="m", base_url=server.url, backoff_s=0.01))
        out = pol.complete([], [])
        assert out.content == "hi" and out.retries == 1
        assert server.times[1] - server.times[0] >= 0.95  # waited as asked, not the 0.01 s backoff
    finally:
        server.close()
    slept: list[float] = []

    def busy() -> None:
        raise TransientError("HTTP 429", retry_after=3600)

    with pytest.raises(PolicyError, match="retry after 3600s"):
        with_retries(busy, PolicyConfig(), sleep=slept.append)
    assert slept == []  # told to wait an hour: fails now instead of stalling the episode


def test_a_stalled_endpoint_gives_up_within_the_retry_budget():
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)  # accepts connections (kernel backlog) and never answers
    try:
        pol = make_policy(PolicyConfig(kind="openai", model="m", base_url=f"http://127.0.0.1:{sock.getsockname()[1]}/v1",
                                       timeout_s=0.5, retry_budget_s=1.5, backoff_s=0.05, max_retries=50))
        t0 = time.monotonic()
        with pytest.raises(PolicyError, match="retry budget"):
            pol.complete([], [])
        assert time.monotonic() - t0 < 5
    finally:
        sock.close()
    d = PolicyConfig()  # the defaults: a dead endpoint costs minutes, not the ~50 of 5 x 600 s
    assert d.connect_timeout_s <= 10 and d.timeout_s + d.retry_budget_s <= 15 * 60


# ---- budgets and prompts -------------------------------------------------------------------------
def test_time_token_and_cost_budgets_stop_an_episode(tmp_path: Path, quick: AgentConfig):
    slow = ScriptedPolicy(steps=[reply("", ("bash", {"command": "sleep 0.6"}))] * 10)
    traj = run_episode(RELU, slow, quick.model_copy(update={"max_turns": 10, "max_seconds": 1.0}), tmp_path / "a")
    assert traj.stop_reason == "time_budget" and 1 <= len(traj.turns) <= 3 and traj.finished
    assert traj.final is not None  # the final evaluation runs regardless

    wordy = [PolicyReply(content="", tool_calls=reply("", ("glob", {"pattern": "*"})).tool_calls,
                         usage=Usage(prompt_tokens=1000, completion_tokens=10))] * 10
    traj = run_episode(RELU, ScriptedPolicy(steps=wordy), quick.model_copy(update={"max_turns": 10,
                                                                                   "max_total_tokens": 2500}),
                       tmp_path / "b")
    assert traj.stop_reason == "token_budget" and len(traj.turns) == 3

    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"my-*": {"input": 1000.0, "output": 0.0}}))  # $1 per 1000-token prompt
    priced = PolicyConfig(kind="openai", model="org/my-model", base_url="http://127.0.0.1:9/v1")
    cfg = quick.model_copy(update={"max_turns": 10, "max_cost_usd": 2.5, "price_table": str(prices)})
    traj = run_episode(RELU, ScriptedPolicy(priced, steps=wordy), cfg, tmp_path / "c")
    assert traj.stop_reason == "cost_budget" and len(traj.turns) == 3 and traj.cost_usd == pytest.approx(3.0)
    with pytest.raises(ValueError, match="needs a price"):
        run_episode(RELU, ScriptedPolicy(priced.model_copy(update={"model": "unknown-model"}), steps=wordy), cfg,
                    tmp_path / "d")


def test_system_prompt_template(tmp_path: Path, quick: AgentConfig):
    template = tmp_path / "prompt.txt"
    template.write_text("You write $backend kernels for $task_name. Costs $$0.\n$task\n")
    traj = run_episode(RELU, ScriptedPolicy(steps=[]), quick.model_copy(update={"system_prompt": str(template)}),
                       tmp_path / "ep")
    system = traj.messages[0].content
    assert system.startswith("You write cpu kernels for relu. Costs $0.\n") and "torch.relu(x)" in system
    assert "SKILL" not in system and "# Your task" not in system
    template.write_text("$skil")
    with pytest.raises(ValueError, match="placeholder"):
        run_episode(RELU, ScriptedPolicy(steps=[]), quick.model_copy(update={"system_prompt": str(template)}),
                    tmp_path / "ep2")


# ---- the best state is delivered when the last is broken ---------------------------------------
def test_broken_final_state_delivers_the_best_one(tmp_path: Path, quick: AgentConfig):
    steps = [reply("", write("model_new.py", RELU_MODEL_NEW), write("kernels/relu.cpp", RELU_KERNEL),
                   write("kernels/relu_binding.cpp", RELU_BINDING)),
             reply("", ("bash", {"command": "./verify.sh"})),
             reply("", write("model_new.py", "this is not python")),
             reply("all done")]
    traj = run_episode(RELU, ScriptedPolicy(steps=steps), quick, tmp_path / "ep")
    assert traj.final is not None and traj.final.reward == -1
    assert traj.best is not None and traj.best.result.reward >= 1
    assert traj.best_final is not None and traj.best_final.reward >= 1 and traj.best_final.time_ms is not None
    assert traj.delivered is traj.best_final and traj.summary()["delivered_reward"] >= 1
    assert BatchSummary.of([traj]).pass_rate == 1.0  # was 0% while best/ held a kernel that scored
    assert [d.path for d in traj.diffs if d.turn == 0] == ["kernels/relu.cpp", "kernels/relu_binding.cpp",
                                                          "model_new.py"]
    assert [(d.path, d.status) for d in traj.diffs if d.turn == 2] == [("model_new.py", "modified")]
    assert "+this is not python" in traj.diffs[-1].diff


# ---- durable turns ---------------------------------------------------------------------------------
CRASHING_RUN = '''
import os, signal, sys
from pathlib import Path
from cuda_agent.agent import AgentConfig, run_episode
from cuda_agent.agent.policies import reply
from cuda_agent.evaluation import EvalConfig
from tests.agent.test_run import RELU, ByTurn, write

def die(messages):
    os.kill(os.getpid(), signal.SIGKILL)  # a crash: no clean-up, no final record

steps = [reply("", write("kernels/a.cpp", "// turn 0")), reply("", ("bash", {"command": "echo turn1 > note.txt"})), die]
cfg = AgentConfig(backend="cpu", max_turns=8, eval=EvalConfig(backend="cpu", compile_mode=None, cache_dir=sys.argv[2]))
run_episode(RELU, ByTurn(steps), cfg, sys.argv[1], episode_id="ep")
'''


def test_turns_are_journaled_and_a_crashed_episode_resumes_mid_way(tmp_path: Path, quick: AgentConfig,
                                                                   cache_dir: Path):
    ep = tmp_path / "episodes" / "ep"  # a batch's layout, which the live board reads
    proc = subprocess.run([sys.executable, "-c", CRASHING_RUN, str(ep), str(cache_dir)], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    state = load_journal(ep / JOURNAL)
    assert state is not None and state.ended is None and len(state.trajectory.turns) == 2
    assert [c.name for c in state.trajectory.tool_calls] == ["write_file", "bash"]

    board = JournalBoard(tmp_path, ["ep"])
    (row,) = board.running()
    assert row.turn == 1 and row.last_tool.startswith("bash echo turn1")

    steps = [None, None, reply("", ("bash", {"command": "cat note.txt kernels/a.cpp"})), reply("finished")]
    traj = run_episode(RELU, ByTurn(steps), quick.model_copy(update={"max_turns": 8}), ep, episode_id="ep")
    assert traj.stop_reason == "done" and traj.environment["resumed_at_turns"] == [2]
    assert [t.index for t in traj.turns] == [0, 1, 2, 3]
    assert [c.name for c in traj.tool_calls] == ["write_file", "bash", "bash"]
    assert traj.messages[-2].content == "turn1\n// turn 0"  # the workspace went on from where it was
    assert load_journal(ep / JOURNAL).ended == "done"


# ---- one run per folder ------------------------------------------------------------------------
def test_a_second_run_on_a_live_runs_folder_is_refused(tmp_path: Path, quick: AgentConfig):
    out = tmp_path / "out"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from cuda_agent.isolation.processes import RunLock; "
                               "RunLock(sys.argv[1]).acquire(); print('held', flush=True); time.sleep(60)", str(out)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RunBusy, match=f"pid {holder.pid}"):
            run_batch([RELU], ScriptedPolicy(steps=[]), quick, out)
    finally:
        holder.kill()
        holder.wait()
    with RunLock(out):  # a killed holder leaves no stale lock
        pass
    assert run_batch([RELU], ScriptedPolicy(steps=[]), quick, out).finished == 1
    assert len(load_trajectories(out / TRAJECTORIES)) == 1


def test_cli_refuses_bad_budgets_and_templates_before_running(tmp_path: Path, cache_dir: Path):
    from typer.testing import CliRunner

    from cuda_agent.cli import app

    base = ["optimize", "swish", "--backend", "cpu", "--out", str(tmp_path / "out"), "--policy", "openai", "--model",
            "no-such-model", "--base-url", "http://127.0.0.1:9/v1"]
    r = CliRunner().invoke(app, [*base, "--max-cost", "1"])
    assert r.exit_code == 2 and "needs a price for model 'no-such-model'" in r.output
    r = CliRunner().invoke(app, [*base, "--system-prompt", str(tmp_path / "missing.txt")])
    assert r.exit_code == 2 and "cannot read system prompt template" in r.output
    assert not (tmp_path / "out" / TRAJECTORIES).exists()
    r = CliRunner().invoke(app, ["view", str(tmp_path / "nowhere")])
    assert r.exit_code != 0 and "no run folder" in r.output
