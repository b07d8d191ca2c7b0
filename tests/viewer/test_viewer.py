"""The trajectory viewer (issue 15) in a real headless browser: Debian's chromium loads the page
served by `cuda-agent view` over a real CPU run (the scripted agent writes a kernel, verifies it,
breaks it), and the DOM it renders must show the episode list (optimize, bench and train rows,
a running episode) and one episode's conversation, tool outputs, file diffs and evaluation
breakdowns. chromium is a system package the README names (setup installs nothing system-wide); elsewhere the
browser tests skip, saying so (the JSON routes are still tested without a browser)."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.request
from pathlib import Path
from urllib.parse import quote

import pytest

from cuda_agent.agent import AgentConfig, ScriptedPolicy, run_batch
from cuda_agent.agent.batch import TRAJECTORIES
from cuda_agent.agent.journal import JOURNAL
from cuda_agent.agent.policies import reply
from cuda_agent.agent.trajectory import load_trajectories
from cuda_agent.evaluation import EvalConfig
from cuda_agent.tasks import Task
from cuda_agent.viewer import ViewerServer
from tests.conftest import RELU_BINDING, RELU_KERNEL, RELU_MODEL_NEW, RELU_TASK

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory, cache_dir: Path) -> Path:
    """A real run: optimize trajectories, a bench-style trajectory file, RFT rows, a running journal."""
    root = tmp_path_factory.mktemp("viewer-run")
    steps = [reply("Write the kernel.", ("write_file", {"path": "model_new.py", "content": RELU_MODEL_NEW}),
                   ("write_file", {"path": "kernels/relu.cpp", "content": RELU_KERNEL}),
                   ("write_file", {"path": "kernels/relu_binding.cpp", "content": RELU_BINDING})),
             reply("Check it.", ("bash", {"command": "./verify.sh"})),
             reply("Break it.", ("write_file", {"path": "model_new.py", "content": "not python <&>"})),
             reply("All done.")]
    fast = EvalConfig(backend="cpu", compile_mode=None, cache_dir=str(cache_dir), trials=2)
    run_batch([Task.from_source(RELU_TASK, name="relu")], ScriptedPolicy(steps=steps),
              AgentConfig(backend="cpu", max_turns=6, eval=fast), root / "optimize")
    (traj,) = load_trajectories(root / "optimize" / TRAJECTORIES)
    bench = root / "bench" / "workspaces"
    bench.mkdir(parents=True)
    (bench / "relu-1.trajectory.json").write_text(traj.model_copy(update={"episode_id": "bench-relu"})
                                                  .model_dump_json())
    from cuda_agent.train.rft import to_sft_row  # the row the RFT stage writes for a kept episode

    (root / "train").mkdir()
    (root / "train" / "rft.jsonl").write_text(json.dumps(to_sft_row(traj)) + "\n")
    live = root / "live" / "episodes" / "relu-live"  # a journal without an end: an episode still running
    live.mkdir(parents=True)
    lines = (Path(traj.workdir) / JOURNAL).read_text().splitlines()[:-1]
    (live / JOURNAL).write_text("\n".join(lines).replace(traj.episode_id, "relu-live") + "\n")
    return root


@pytest.fixture(scope="module")
def server(run_dir: Path):
    s = ViewerServer(run_dir).start()
    yield s
    s.close()


def get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())


def test_routes_list_every_source(server: ViewerServer):
    rows = get(server.url + "api/run")["episodes"]
    by = {(r["source"], r["status"]) for r in rows}
    assert {("optimize", "done"), ("bench", "done"), ("train", "sft row"), ("optimize", "running")} <= by, by
    done = next(r for r in rows if r["source"] == "optimize" and r["status"] == "done")
    assert (done["final_reward"], done["best_reward"], done["delivered_reward"], done["turns"]) == (-1, 1, 1, 4)
    ep = get(server.url + "api/episode?key=" + quote(done["key"]))["episode"]
    assert ep["best_final"]["reward"] >= 1 and len(ep["diffs"]) == 4
    with pytest.raises(urllib.error.HTTPError):
        get(server.url + "api/episode?key=nope")


def chromium(*args: str) -> str:
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (a system package: apt-get install chromium fonts-dejavu-core; README)")
    out = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                          "--virtual-time-budget=10000", *args], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def test_browser_renders_the_episode_list(server: ViewerServer, tmp_path: Path):
    dom = chromium("--dump-dom", server.url)
    assert 'data-ready="1"' in dom, dom[-2000:]
    assert dom.count('class="episode"') == 4 and "relu" in dom and "sft row" in dom and "running" in dom
    assert '<span class="badge r-1">-1</span>' in dom and '<span class="badge r1">+1</span>' in dom
    shot = tmp_path / "list.png"
    chromium("--window-size=1200,600", f"--screenshot={shot}", server.url)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000


def test_browser_renders_one_episode(server: ViewerServer):
    key = next(r["key"] for r in get(server.url + "api/run")["episodes"]
               if r["source"] == "optimize" and r["status"] == "done")
    dom = chromium("--dump-dom", f"{server.url}#/episode/{quote(key, safe='')}")
    assert 'data-ready="1"' in dom, dom[-2000:]
    assert "Write the kernel." in dom and "Break it." in dom  # the conversation
    assert "bash  ./verify.sh" in dom and "created kernels/relu.cpp" in dom  # calls with their outputs
    assert '<span class="add">+not python &lt;&amp;&gt;\n</span>' in dom  # the diff, escaped
    assert "reason: correct" in dom and "vs eager" in dom and "candidate " in dom  # evaluation breakdowns
    assert 'id="timeline"' in dom and dom.count('class="tick') == 4
    assert "the final state is broken; the best state, evaluated in full" in dom
