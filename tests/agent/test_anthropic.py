"""The Anthropic Messages policy against a loopback server speaking the Messages API."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("anthropic")

from cuda_agent.agent import AgentConfig, PolicyConfig, make_policy, run_episode  # noqa: E402
from cuda_agent.agent.policies.anthropic_messages import to_anthropic  # noqa: E402
from cuda_agent.agent.trajectory import Message, ToolCall  # noqa: E402
from cuda_agent.evaluation import EvalConfig  # noqa: E402
from cuda_agent.tasks import Task  # noqa: E402
from tests.conftest import RELU_TASK  # noqa: E402


class FakeAnthropic:
    def __init__(self, script: list[Any]):
        self.script, self.requests = script, []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(body)
                step = outer.script.pop(0) if outer.script else [{"type": "text", "text": "done"}]
                code, payload = (step[1], {"type": "error", "error": {"type": "api_error", "message": step[2]}}) \
                    if isinstance(step, tuple) else (200, {
                        "id": "msg", "type": "message", "role": "assistant", "model": body["model"], "content": step,
                        "stop_reason": "tool_use" if any(b["type"] == "tool_use" for b in step) else "end_turn",
                        "stop_sequence": None, "usage": {"input_tokens": 100, "output_tokens": 9}})
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_message_conversion_pairs_tool_results():
    system, msgs = to_anthropic([
        Message(role="system", content="S"), Message(role="user", content="go"),
        Message(role="assistant", content="x", tool_calls=[ToolCall(id="t1", name="bash", arguments={"command": "ls"}),
                                                           ToolCall(id="t2", name="glob", arguments={"pattern": "*"})]),
        Message(role="tool", content="a", tool_call_id="t1"), Message(role="tool", content="", tool_call_id="t2")])
    assert system == "S" and [m["role"] for m in msgs] == ["user", "assistant", "user"]
    assert [b["type"] for b in msgs[1]["content"]] == ["text", "tool_use", "tool_use"]
    assert [b["tool_use_id"] for b in msgs[2]["content"]] == ["t1", "t2"]
    assert msgs[2]["content"][1]["content"] == "(empty)"


def test_anthropic_episode_with_tool_use_and_retry(tmp_path: Path, fast_config: EvalConfig, monkeypatch):
    monkeypatch.setenv("TEST_ANTHROPIC_KEY", "sk-test")
    server = FakeAnthropic([
        ("status", 529, "overloaded"),
        [{"type": "text", "text": "Listing."},
         {"type": "tool_use", "id": "tu1", "name": "glob", "input": {"pattern": "*.sh"}}],
        [{"type": "text", "text": "Finished."}],
    ])
    try:
        pol = make_policy(PolicyConfig(kind="anthropic", model="claude-test", base_url=server.url,
                                       api_key_env="TEST_ANTHROPIC_KEY", backoff_s=0.01, max_retries=2))
        traj = run_episode(Task.from_source(RELU_TASK, name="relu"), pol,
                           AgentConfig(backend="cpu", max_turns=4, eval=fast_config), tmp_path / "ep")
    finally:
        server.close()
    assert traj.stop_reason == "done" and traj.turns[0].retries == 1
    assert traj.tool_calls[0].name == "glob" and traj.tool_calls[0].ok
    last = server.requests[-1]
    assert last["system"].startswith("# SKILL") and [t["name"] for t in last["tools"]][0] == "bash"
    result_block = last["messages"][-1]["content"][0]
    assert result_block["type"] == "tool_result" and result_block["tool_use_id"] == "tu1"
    assert "verify.sh" in result_block["content"]
    assert traj.usage.prompt_tokens == 200 and "sk-test" not in traj.model_dump_json()
