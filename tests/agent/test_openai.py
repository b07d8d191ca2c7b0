"""The loop against a real HTTP server on loopback that speaks OpenAI chat completions and
serves scripted replies: native and text tool calls, malformed calls, 500s and timeouts,
context overflow, and an end-to-end episode that writes a correct CPU kernel."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

import pytest

pytest.importorskip("openai")

from cuda_agent.agent import AgentConfig, PolicyConfig, make_policy, run_episode  # noqa: E402
from cuda_agent.agent.policies import PolicyError  # noqa: E402
from cuda_agent.agent.snapshots import candidate_files  # noqa: E402
from cuda_agent.evaluation import EvalConfig  # noqa: E402
from cuda_agent.examples import get_example  # noqa: E402
from cuda_agent.tasks import Task  # noqa: E402
from tests.conftest import RELU_TASK  # noqa: E402

Reply = dict[str, Any] | Callable[[dict[str, Any]], Any]


class FakeOpenAI:
    """Serves `/v1/chat/completions` from a script. Each entry is an assistant message dict, or a
    function of the request body returning one, or ("status", code, message), or ("sleep", s)."""

    def __init__(self) -> None:
        self.script: list[Any] = []
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.lock:
                    server.requests.append(body)
                    step = server.script.pop(0) if server.script else {"content": "done"}
                if callable(step):
                    step = step(body)
                if isinstance(step, tuple) and step[0] == "sleep":
                    time.sleep(step[1])
                    step = {"content": "too late"}
                if isinstance(step, tuple) and step[0] == "status":
                    return self._send(step[1], {"error": {"message": step[2], "type": "error"}})
                usage = {"prompt_tokens": len(json.dumps(body["messages"])) // 4, "completion_tokens": 7}
                self._send(200, {"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                                 "choices": [{"index": 0, "finish_reason": "stop",
                                              "message": {"role": "assistant", **step}}],
                                 "usage": {**usage, "total_tokens": usage["prompt_tokens"] + 7}})

            def _send(self, code: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture()
def server():
    s = FakeOpenAI()
    yield s
    s.close()


def call(name: str, args: dict[str, Any] | str, cid: str = "c1") -> dict[str, Any]:
    return {"id": cid, "type": "function",
            "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}


def policy(server: FakeOpenAI, **kw: Any):
    fields = {"kind": "openai", "model": "scripted-model", "base_url": server.url, "timeout_s": 10,
              "max_retries": 3, "backoff_s": 0.01, **kw}
    return make_policy(PolicyConfig(**fields))


@pytest.fixture()
def agent_config(fast_config: EvalConfig) -> AgentConfig:
    return AgentConfig(backend="cpu", max_turns=8, eval=fast_config, bash_timeout_s=60)


RELU = Task.from_source(RELU_TASK, name="relu")


def test_native_tool_calls(server: FakeOpenAI, agent_config: AgentConfig, tmp_path: Path):
    server.script = [
        {"content": "Looking.", "tool_calls": [call("bash", {"command": "echo hello-from-bash"}, "a1"),
                                               call("read_file", {"path": "model.py", "num_lines": 3}, "a2")]},
        {"content": "Finished."},
    ]
    traj = run_episode(RELU, policy(server), agent_config, tmp_path / "ep")
    assert traj.stop_reason == "done" and len(traj.turns) == 2
    first, second = server.requests
    assert [t["function"]["name"] for t in first["tools"]] == ["bash", "read_file", "write_file", "edit_file",
                                                              "glob", "grep"]
    assert first["messages"][0]["role"] == "system" and "SKILL" in first["messages"][0]["content"]
    assert "class Model" in first["messages"][0]["content"]  # the task is in the system prompt
    tool_msgs = [m for m in second["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_msgs] == ["a1", "a2"]
    assert tool_msgs[0]["content"].strip() == "hello-from-bash"
    assert "import torch" in tool_msgs[1]["content"]
    assert traj.usage.completion_tokens == 14 and traj.usage.prompt_tokens > 0
    assert all(c.ok for c in traj.tool_calls)
    assert traj.final is not None and traj.final.reward == -1  # the starter uses torch compute: not a kernel


def test_text_format_tool_calls(server: FakeOpenAI, agent_config: AgentConfig, tmp_path: Path):
    text_call = '<tool_call>{"name": "bash", "arguments": {"command": "echo via-text"}}</tool_call>'
    server.script = [{"content": f"I will run it.\n{text_call}"}, {"content": "Done."}]
    traj = run_episode(RELU, policy(server, tool_format="text"), agent_config, tmp_path / "ep")
    first, second = server.requests
    assert "tools" not in first and "<tools>" in first["messages"][0]["content"]
    assert traj.tool_calls[0].name == "bash" and traj.tool_calls[0].ok
    assert "<tool_response" in second["messages"][-1]["content"] and "via-text" in second["messages"][-1]["content"]
    # a server with native tools whose model writes text calls anyway: parsed too
    server.script = [{"content": text_call}, {"content": "Done."}]
    traj = run_episode(RELU, policy(server), agent_config, tmp_path / "ep2")
    assert traj.tool_calls and traj.tool_calls[0].ok and "via-text" in traj.messages[3].content


def test_malformed_calls_become_tool_errors(server: FakeOpenAI, agent_config: AgentConfig, tmp_path: Path):
    server.script = [
        {"content": "", "tool_calls": [call("bash", '{"command": "echo x"', "m1"), call("rm_rf", {}, "m2"),
                                       call("read_file", {"file": "model.py"}, "m3")]},
        {"content": "<tool_call>{not json}</tool_call>"},
        {"content": "", "tool_calls": [call("bash", {"command": "echo recovered"}, "m4")]},
        {"content": "ok, done"},
    ]
    traj = run_episode(RELU, policy(server), agent_config, tmp_path / "ep")
    assert traj.stop_reason == "done" and len(traj.turns) == 4
    errors = [c.error for c in traj.tool_calls if not c.ok]
    assert len(errors) == 4
    assert "not valid JSON" in errors[0] and "unknown tool 'rm_rf'" in errors[1]
    assert "file: unexpected argument" in errors[2] and "not valid JSON" in errors[3]
    assert traj.tool_calls[-1].ok
    shown = [m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert all(s.startswith("Error:") for s in shown)


def test_http_500_then_success_is_retried(server: FakeOpenAI, agent_config: AgentConfig, tmp_path: Path):
    server.script = [("status", 500, "boom"), ("status", 503, "busy"), {"content": "done"}]
    traj = run_episode(RELU, policy(server), agent_config, tmp_path / "ep")
    assert traj.stop_reason == "done" and traj.turns[0].retries == 2 and len(server.requests) == 3


def test_persistent_500_fails_clearly(server: FakeOpenAI, agent_config: AgentConfig, tmp_path: Path):
    server.script = [("status", 500, "boom")] * 10
    traj = run_episode(RELU, policy(server, max_retries=2), agent_config, tmp_path / "ep")
    assert traj.stop_reason == "policy_error" and not traj.finished
    assert "gave up after 3 attempt(s)" in traj.error and "500" in traj.error
    assert len(server.requests) == 3
    assert traj.final is not None  # the environment still judged the final workspace


def test_timeout_is_retried_then_fails(server: FakeOpenAI, agent_config: AgentConfig, tmp_path: Path):
    server.script = [("sleep", 3.0), {"content": "done"}]
    traj = run_episode(RELU, policy(server, timeout_s=0.5, max_retries=1), agent_config, tmp_path / "ep")
    assert traj.stop_reason == "done" and traj.turns[0].retries == 1
    server.script = [("sleep", 3.0), ("sleep", 3.0)]
    traj = run_episode(RELU, policy(server, timeout_s=0.5, max_retries=1), agent_config, tmp_path / "ep2")
    assert traj.stop_reason == "policy_error" and "Timeout" in traj.error


def test_auth_error_is_not_retried(server: FakeOpenAI):
    server.script = [("status", 401, "bad key")]
    with pytest.raises(PolicyError, match="401"):
        policy(server).complete([], [])
    assert len(server.requests) == 1


def test_context_overflow_compaction_keeps_the_run_alive(server: FakeOpenAI, agent_config: AgentConfig,
                                                         tmp_path: Path):
    limit_chars = 60_000

    def guarded(reply: dict[str, Any]) -> Callable[[dict[str, Any]], Any]:
        def respond(body: dict[str, Any]) -> Any:
            if len(json.dumps(body["messages"])) > limit_chars:
                with server.lock:
                    server.script.insert(0, respond)  # the refused reply is served on the next request
                return ("status", 400, "This model's maximum context length is 16384 tokens. "
                                       "Please reduce the length of the messages.")
            return reply
        return respond

    big = {"command": "seq 100000 125000"}  # ~150 KB of output, capped by the tool to 30,000 chars
    server.script = [guarded({"content": "", "tool_calls": [call("bash", big, f"b{i}")]}) for i in range(5)]
    server.script += [guarded({"content": "done"})] * 10
    traj = run_episode(RELU, policy(server), agent_config, tmp_path / "ep")
    assert traj.stop_reason == "done", traj.error
    assert len([c for c in traj.tool_calls if c.ok]) == 5
    overflow = [c for c in traj.compactions if c.reason == "overflow"]
    assert overflow and overflow[0].tokens_after < overflow[0].tokens_before
    refused = [r for r in server.requests if len(json.dumps(r["messages"])) > limit_chars]
    assert 1 <= len(refused) <= 3
    # the trajectory keeps the full outputs as the model first saw them
    assert max(len(m.content) for m in traj.messages if m.role == "tool") > 20_000


def test_budget_compaction_without_endpoint_errors(server: FakeOpenAI, agent_config: AgentConfig, tmp_path: Path):
    cfg = agent_config.model_copy(update={"context_tokens": 12_000})
    server.script = [{"content": "", "tool_calls": [call("bash", {"command": "seq 1 40000"}, f"s{i}")]}
                     for i in range(6)] + [{"content": "done"}]
    traj = run_episode(RELU, policy(server, max_tokens=2000), cfg, tmp_path / "ep")
    assert traj.stop_reason == "done"
    assert any(c.reason == "budget" for c in traj.compactions)
    assert all(len(json.dumps(r["messages"])) < 12_000 * 4.5 for r in server.requests)
    assert "oldest turn(s) were removed" in server.requests[-1]["messages"][1]["content"] or \
        "compacted" in json.dumps(server.requests[-1]["messages"])


@pytest.mark.slow
def test_end_to_end_scripted_agent_writes_a_correct_kernel(server: FakeOpenAI, agent_config: AgentConfig,
                                                           tmp_path: Path):
    ex = get_example("swish")
    sol = ex.solution_dir("cpu")
    files = {"model_new.py": (sol / "model_new.py").read_text()}
    files.update({f"kernels/{p.name}": p.read_text() for p in sorted((sol / "kernels").iterdir())})
    broken = files["kernels/swish.cpp"].replace("{", "{ this does not compile;", 1)
    server.script = [
        {"content": "Read the task.", "tool_calls": [call("read_file", {"path": "model.py"}, "r1")]},
        {"content": "A first kernel.", "tool_calls": [
            call("write_file", {"path": k, "content": broken if k.endswith("swish.cpp") else v}, f"w{i}")
            for i, (k, v) in enumerate(files.items())]},
        {"content": "", "tool_calls": [call("bash", {"command": "./verify.sh"}, "v1")]},
        {"content": "Fix it.", "tool_calls": [call("write_file", {"path": "kernels/swish.cpp",
                                                                   "content": files["kernels/swish.cpp"]}, "f1")]},
        {"content": "", "tool_calls": [call("bash", {"command": "./compile.sh && ./verify.sh"}, "v2")]},
        {"content": "I am done; the kernel is great (reward 3)."},
    ]
    cfg = agent_config.model_copy(update={"max_turns": 20, "bash_timeout_s": 400})  # a cold cache builds the PCH
    small = Task.from_source(ex.task.source.replace("batch_size = 4096", "batch_size = 128"), name="swish-small")
    traj = run_episode(small, policy(server), cfg, tmp_path / "ep")  # the solution is size-generic
    assert traj.stop_reason == "done", traj.error
    verifies = [e for e in traj.evaluations if e.trigger == "verify"]
    assert [e.result.reward for e in verifies] == [-1, 1] and verifies[1].improved
    # the final reward is the environment's verdict on the final workspace, not the agent's claim
    assert traj.final is not None and traj.final.reward >= 1 and traj.final_reward in (1, 2, 3)
    assert traj.evaluations[-1].trigger == "final" and traj.evaluations[-1].measured
    assert traj.final.time_ms.candidate is not None
    # the best state is the kernel that scored
    assert traj.best is not None and traj.best.result.reward >= 1
    assert traj.best.candidate_hash == verifies[1].candidate_hash  # the state that scored at turn 4
    best = Path(traj.best.path)
    assert sorted(traj.best.files) == sorted(files) == sorted(candidate_files(best))
    for rel, text in files.items():
        assert (best / rel).read_text() == text
    assert traj.best_reward >= 1
    # restore the best state and evaluate it for real: it scores >= 1
    from cuda_agent.agent import restore_snapshot
    from cuda_agent.evaluation import evaluate
    from cuda_agent.workspace import open_workspace

    ws = open_workspace(tmp_path / "ep" / "workspace")
    restore_snapshot(traj.best, ws.root)
    assert evaluate(ws, cfg.eval).reward >= 1
