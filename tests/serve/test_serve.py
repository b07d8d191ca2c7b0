"""`cuda-agent serve` over real HTTP: a real uvicorn server in a subprocess on the CPU backend,
evaluating a tiny ReLU task with cheap options (no timing, one trial)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest

from cuda_agent.evaluation import EvalConfig
from cuda_agent.serve.client import ServiceClient, ServiceError
from tests.conftest import RELU_BINDING, RELU_KERNEL, RELU_MODEL_NEW, RELU_TASK
from tests.evaluation.test_evaluate_cpu import HANG_KERNEL

pytestmark = pytest.mark.slow
SRC = Path(__file__).resolve().parents[2] / "src"
TOKEN = "test-token"
CHEAP = {"measure": False, "trials": 1, "compile_baseline": False}
HONEST = {"model_new.py": RELU_MODEL_NEW, "kernels/relu.cpp": RELU_KERNEL, "kernels/relu_binding.cpp": RELU_BINDING}
WRONG = {**HONEST, "kernels/relu.cpp": RELU_KERNEL.replace("x[i] > 0.f ? x[i] : 0.f", "x[i]")}
HANG = {**HONEST, "kernels/relu.cpp": HANG_KERNEL}


class Server:
    """`python -m cuda_agent serve` in its own session; killable like a crash (SIGKILL)."""

    def __init__(self, db: Path, cache: Path, *args: str) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        path = os.pathsep.join(p for p in (str(SRC), os.environ.get("PYTHONPATH")) if p)  # e.g. carried wheels
        env = {**os.environ, "PYTHONPATH": path, "CUDA_AGENT_CACHE": str(cache), "CUDA_AGENT_SERVE_TOKEN": TOKEN}
        self.log = db.with_suffix(f".{self.port}.log")
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "cuda_agent", "serve", "--db", str(db), "--port",
                                          str(self.port), "--memory-limit-gb", "3", *args], env=env, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        self.url = f"http://127.0.0.1:{self.port}"
        self.client = ServiceClient(self.url, TOKEN, timeout_s=120)
        deadline = time.monotonic() + 60
        while True:
            try:
                self.client.health()
                return
            except (OSError, ServiceError):
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"server did not start:\n{self.log.read_text()}")
                time.sleep(0.3)

    def descendants(self) -> set[int]:
        return subtree(self.proc.pid)

    def slot_pids(self) -> list[int]:
        return [p for p in self.descendants() if b"cuda_agent.backends.slots" in _cmdline(p)]

    def kill9(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def subtree(root: int) -> set[int]:
    """Every process below `root` (children are started from several threads, so walk the parent
    links of all processes rather than one thread's children list)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
    out, todo = set(), [root]
    while todo:
        pid = todo.pop()
        kids = [k for k, p in parents.items() if p == pid]
        out.update(kids)
        todo.extend(kids)
    return out


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _alive(pids: set[int]) -> set[int]:
    return {p for p in pids if Path(f"/proc/{p}").exists() and b"zombie" not in _status(p)}


def _status(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/status").read_bytes().lower()
    except OSError:
        return b""


def raw(url: str, method: str = "GET", body: bytes | None = None, token: str | None = TOKEN,
        headers: dict[str, str] | None = None) -> tuple[int, Any, dict[str, str]]:
    h = {"Content-Type": "application/json", **(headers or {})}
    if token is not None:
        h["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, data=body, method=method, headers=h)
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            data = r.read()
            return r.status, json.loads(data) if r.headers.get_content_type() == "application/json" else data, dict(
                r.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null"), dict(exc.headers)


def submit_body(files: dict[str, str] = HONEST, **options: Any) -> bytes:
    return json.dumps({"task": {"source": RELU_TASK}, "files": files, "options": {**CHEAP, **options}}).encode()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, cache_dir: Path) -> Iterator[Server]:
    srv = Server(tmp_path_factory.mktemp("serve") / "s.sqlite", cache_dir, "--max-file-bytes", "8192",
                 "--max-body-bytes", "65536")
    yield srv
    srv.stop()


def test_every_request_needs_the_token(server: Server) -> None:
    for path in ("/v1/health", "/metrics", "/openapi.json", "/v1/evaluations/abc"):
        assert raw(server.url + path, token=None)[0] == 401
        assert raw(server.url + path, token="wrong")[0] == 401
    status, body, headers = raw(server.url + "/v1/evaluations", "POST", submit_body(), token=None)
    assert status == 401 and "bearer token" in body["detail"] and headers.get("www-authenticate") == "Bearer"
    status, schema, _ = raw(server.url + "/openapi.json")
    assert status == 200 and "/v1/evaluations" in schema["paths"] and "/v1/env/step" in schema["paths"]


def test_bad_input_gets_a_clear_4xx(server: Server) -> None:
    url = server.url + "/v1/evaluations"
    assert raw(url, "POST", b"{not json")[0] == 422
    status, body, _ = raw(url, "POST", json.dumps({"task": {"name": "no_such_task"}, "files": HONEST}).encode())
    assert status == 422 and "unknown task 'no_such_task'" in body["detail"] and "swish" in body["detail"]
    status, body, _ = raw(url, "POST", json.dumps({"task": {"name": "swish"}, "files": {"kernels/x.cpp": ""}}).encode())
    assert status == 422 and "missing file: model_new.py" in json.dumps(body)
    status, body, _ = raw(url, "POST", submit_body({**HONEST, "../evil.py": "x"}))
    assert status == 422 and "not a candidate path" in json.dumps(body)
    status, body, _ = raw(url, "POST", json.dumps({"task": {"source": "x = 1"}, "files": HONEST}).encode())
    assert status == 422 and "missing top-level" in body["detail"]
    status, body, _ = raw(url, "POST", submit_body({**HONEST, "kernels/big.cpp": "/" * 9000}))
    assert status == 413 and "kernels/big.cpp" in body["detail"]
    status, body, _ = raw(url, "POST", submit_body({**HONEST, "kernels/big.cpp": "/" * 70000}))
    assert status == 413 and "over the limit" in body["detail"]
    assert raw(url, "POST", submit_body(trials=0))[0] == 422
    assert raw(server.url + "/v1/evaluations/nope")[0] == 404


def test_verdicts_are_stored_and_repeats_answered_from_the_store(server: Server) -> None:
    c = server.client
    first = c.submit(RELU_TASK, HONEST, CHEAP, wait_s=100)
    assert first.status == "done" and first.result and first.result.reward == 1 and not first.cached
    again = c.submit(RELU_TASK, HONEST, CHEAP)
    assert again.id == first.id and again.cached and again.status == "done" and again.runs == 1
    assert again.result and again.result.reward == 1
    wrong = c.evaluate(RELU_TASK, WRONG, CHEAP, timeout_s=100)
    assert wrong.reward == -1 and wrong.reason.startswith("incorrect")
    batch = c.submit_batch([(RELU_TASK, HONEST, CHEAP), (RELU_TASK, WRONG, CHEAP)])
    assert [b.cached for b in batch] == [True, True] and [b.result.reward for b in batch] == [1, -1]  # type: ignore[union-attr]
    metrics = c.request("GET", "/metrics")
    assert 'cuda_agent_serve_evaluations_total{reward="1"} 1.0' in metrics
    assert 'cuda_agent_serve_evaluations_total{reward="-1"} 1.0' in metrics
    assert "cuda_agent_serve_cache_hits_total 3.0" in metrics
    health = c.health()
    assert health["counts"] == {"done": 2} and health["queue_depth"] == 0 and health["latency_p50_s"] > 0
    (dev,) = c.request("GET", "/v1/devices")
    assert dev["label"] == "cpu:0" and dev["completed"] == 2 and 0 < dev["utilisation"] <= 1


def test_openenv_style_episode(server: Server) -> None:
    c = server.client
    reset = c.reset(RELU_TASK, CHEAP, max_steps=2)
    assert "class Model" in reset.observation["model.py"] and "ModelNew" in reset.observation["model_new.py"]
    step = c.step(reset.episode_id, WRONG)
    assert step.reward == -1 and not step.done and step.state.step_count == 1
    step = c.step(reset.episode_id, HONEST)
    assert step.reward == 1 and step.done and c.state(reset.episode_id).step_count == 2
    with pytest.raises(ServiceError) as err:
        c.step(reset.episode_id, HONEST)
    assert err.value.status == 409


def test_a_killed_worker_is_replaced_and_its_request_still_answered(server: Server) -> None:
    c = server.client
    row = c.submit(RELU_TASK, HONEST, {**CHEAP, "trials": 3})
    deadline = time.monotonic() + 60
    while c.get(row.id).status != "running":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    (slot,) = server.slot_pids()
    while not (below := subtree(slot)):  # its judge and the judge's workers, once started
        assert time.monotonic() < deadline
        time.sleep(0.05)
    os.kill(slot, signal.SIGKILL)
    done = c.wait(row.id, 120)
    assert done.status == "done" and done.result and done.result.reward == 1
    assert done.runs == 2  # the dead slot's job ran once more on its replacement, and only once
    assert server.slot_pids() and server.slot_pids() != [slot]
    assert not _alive(below | {slot}), "a process of the killed slot was left behind"


def test_backpressure_then_a_crash_mid_queue_loses_nothing_and_runs_nothing_twice(tmp_path: Path,
                                                                                   cache_dir: Path) -> None:
    db = tmp_path / "crash.sqlite"
    srv = Server(db, cache_dir, "--max-queue", "1", "--slots", "1")
    try:
        c = srv.client
        hang = c.submit(RELU_TASK, HANG, {**CHEAP, "timeout_s": 60})
        queued = c.submit(RELU_TASK, HONEST, {**CHEAP, "trials": 2})
        status, body, headers = raw(srv.url + "/v1/evaluations", "POST", submit_body(trials=4))
        assert status == 429 and "queue is full" in body["detail"] and int(headers["retry-after"]) >= 1
        deadline = time.monotonic() + 60
        while c.get(hang.id).status != "running":
            assert time.monotonic() < deadline
            time.sleep(0.1)
        tree = srv.descendants()
        assert tree
        srv.kill9()  # the whole service dies mid-batch: one running, one queued
        deadline = time.monotonic() + 20
        while _alive(tree) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _alive(tree), "a process of the killed service was left behind"
    finally:
        srv.stop()
    srv = Server(db, cache_dir, "--max-queue", "1", "--slots", "1")
    try:
        c = srv.client
        failed = c.get(hang.id)
        assert failed.status == "failed" and failed.error and failed.error.startswith("interrupted")
        assert failed.runs == 1
        done = c.wait(queued.id, 120)
        assert done.status == "done" and done.result and done.result.reward == 1 and done.runs == 1
        time.sleep(1.0)
        assert c.get(hang.id).status == "failed"  # not re-run unasked
        assert c.health()["counts"] == {"done": 1, "failed": 1}
    finally:
        srv.stop()


def test_verl_reward_and_trl_reward_function_call_the_service(server: Server, monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    """The existing verl stage-1 reward (`service_url` in its settings) and the TRL reward function
    score a response through the service; the same candidate's stored verdict answers both."""
    import asyncio

    from cuda_agent.tasks import Task
    from cuda_agent.train.trl.reward import service_reward
    from cuda_agent.train.verl import eval_pool
    from cuda_agent.train.verl.data import task_row
    from cuda_agent.train.verl.reward import compute_score

    monkeypatch.setenv("CUDA_AGENT_SERVE_TOKEN", TOKEN)
    monkeypatch.setattr(eval_pool, "_EVALUATORS", {})
    answer = f"```python\n{RELU_MODEL_NEW}```\n```cpp\n// relu.cpp\n{RELU_KERNEL}```\n```cpp\n// relu_binding.cpp\n" \
             f"{RELU_BINDING}```\n"
    row = task_row(Task.from_source(RELU_TASK, name="relu"), "cpu", single_turn=True)
    cheap = {"measure": False, "trials": 1, "compile_mode": None}
    before = server.client.health()["counts"].get("done", 0)
    got = asyncio.run(compute_score("x", answer, "", row["extra_info"], service_url=server.url, eval=cheap))
    assert got == 1.0
    reward = service_reward(server.url, TOKEN, config=EvalConfig(measure=False, trials=1, compile_mode=None))
    assert reward(["p", "p", "p"], [answer, "no code", [{"role": "assistant", "content": answer}]],
                  task=[RELU_TASK] * 3) == [1.0, -1.0, 1.0]
    assert server.client.health()["counts"]["done"] == before  # answered from the store: same task, files, options



def test_malformed_requests_each_get_a_4xx_and_nothing_is_admitted(server: Server) -> None:
    """Beyond the cases above: bodies that are not an object, not UTF-8, of the wrong shape, and a
    batch with one bad item (refused whole: nothing of it queued). Never a 500."""
    url = server.url + "/v1/evaluations"
    before = server.client.health()["counts"]
    good = json.loads(submit_body())
    cases = [(url, b"[]"), (url, b"null"), (url, b"\xff\xfe{\x00"), (url, b""),
             (url, json.dumps({**good, "files": ["model_new.py"]}).encode()),
             (url, json.dumps({**good, "task": {}}).encode()),
             (url, json.dumps({**good, "options": {"backend": "cuda"}}).encode()),  # the server's choice
             (url, json.dumps({**good, "options": {"timeout_s": -1}}).encode()),
             (url + "/batch", json.dumps({"items": [good, {**good, "task": {"name": "nope"}}]}).encode()),
             (url + "/batch", json.dumps({"items": "x"}).encode()),
             (server.url + "/v1/env/step", json.dumps({"episode_id": "x", "files": {}}).encode())]
    for target, body in cases:
        status, detail, _ = raw(target, "POST", body)
        assert 400 <= status < 500 and detail and detail.get("detail"), (body[:60], status, detail)
    assert raw(url + "?wait=-1", "POST", submit_body())[0] == 422
    assert raw(server.url + "/v1/env/state/nope")[0] == 404
    assert server.client.health()["counts"] == before  # the batch's good item was not admitted either
    assert 'code="500"' not in server.client.request("GET", "/metrics")


PHONE_HOME = '''
import socket
import torch.nn as nn
import cpu_extension

class ModelNew(nn.Module):
    def forward(self, x):
        s = socket.create_connection(("127.0.0.1", PORT), timeout=2)
        s.sendall(b"GET /phone-home HTTP/1.1\\r\\nHost: x\\r\\nAuthorization: Bearer TOKEN\\r\\n\\r\\n")
        s.recv(100)
        return cpu_extension.relu(x.contiguous())
'''


def test_the_candidate_cannot_reach_the_service(server: Server) -> None:
    """A candidate that knows the service's port and token calls it from its forward: refused, and
    the service never sees the request. Through the service every guard is on, so the first layer
    that refuses is the static check (`import socket` is not allowed in model_new.py); the layers
    under it (seccomp: no socket(); an empty network namespace where the OS allows one) are shown
    with the static check off in tests/evaluation/test_guards.py::test_worker_has_no_network and
    tests/isolation/test_sandbox.py. None of them needs network namespaces, so this never skips."""
    source = PHONE_HOME.replace("PORT", str(server.port)).replace("TOKEN", TOKEN)
    result = server.client.evaluate(RELU_TASK, {**HONEST, "model_new.py": source}, CHEAP, timeout_s=200)
    reason = result.reason.lower()
    assert result.reward == -1 and not result.correct
    assert "[forbidden-import] `import socket`" in result.reason or any(
        w in reason for w in ("unreachable", "permission denied", "operation not permitted")), result.reason
    assert 'route="other"' not in server.client.request("GET", "/metrics")  # /phone-home never arrived
