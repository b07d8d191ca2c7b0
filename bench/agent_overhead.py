"""The agent loop's own overhead per turn, without model time and without compile/evaluation time.

A scripted policy (zero model time) drives N turns of cheap tool calls; per turn the loop
records model, tool, evaluation and its own ("loop") seconds. We report the loop's share
(context fitting, message and trajectory records, snapshots bookkeeping), the cost of each file
tool, the sandboxed `bash` start-up next to a bare `bash -c true`, and what compaction costs on a
long history. The final evaluation is excluded (the trusted `evaluate` is the environment's
cost, measured in bench/env_bench.py).

    python bench/agent_overhead.py --turns 200 --out bench/results/agent_overhead.json
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from cuda_agent.agent import AgentConfig, ScriptedPolicy, run_episode
from cuda_agent.agent.context import ContextWindow
from cuda_agent.agent.policies import reply
from cuda_agent.agent.tools import TOOLS
from cuda_agent.agent.trajectory import Message, ToolCall
from cuda_agent.evaluation import EvalConfig
from cuda_agent.examples import get_example


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def cycle_steps(turns: int, bash_every: int) -> list:
    steps = []
    for i in range(turns):
        k = i % 6
        if bash_every and i % bash_every == bash_every - 1:
            steps.append(reply("", ("bash", {"command": "ls kernels; echo ok"})))
        elif k == 0:
            steps.append(reply("read", ("read_file", {"path": "model.py"})))
        elif k == 1:
            steps.append(reply("write", ("write_file", {"path": f"kernels/n{i}.txt", "content": "x = 1\n" * 200})))
        elif k == 2:
            steps.append(reply("edit", ("edit_file", {"path": f"kernels/n{i - 1}.txt",
                                                      "edits": [{"old_string": "x = 1\n", "new_string": "y\n",
                                                                 "replace_all": True}]})))
        elif k == 3:
            steps.append(reply("glob", ("glob", {"pattern": "**/*"})))
        elif k == 4:
            steps.append(reply("grep", ("grep", {"pattern": "torch", "include": "*.py"})))
        else:
            steps.append(reply("think " * 200, ("read_file", {"path": "SKILL.md", "num_lines": 40})))
    return steps


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=200)
    ap.add_argument("--bash-every", type=int, default=10)
    ap.add_argument("--context-tokens", type=int, default=131_072)
    ap.add_argument("--out", type=Path, default=Path("bench/results/agent_overhead.json"))
    args = ap.parse_args()
    ex = get_example("swish")
    cfg = AgentConfig(backend="cpu", max_turns=args.turns, context_tokens=args.context_tokens,
                      eval=EvalConfig(backend="cpu", compile_mode=None, measure=False))
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.monotonic()
        traj = run_episode(ex.task, ScriptedPolicy(steps=cycle_steps(args.turns, args.bash_every)), cfg, tmp)
        wall = time.monotonic() - t0
    turns = traj.turns[:-1] if traj.turns and traj.turns[-1].tool_calls == 0 else traj.turns
    loop = [t.loop_seconds * 1e3 for t in turns]
    per_tool: dict[str, list[float]] = {}
    for c in traj.tool_calls:
        per_tool.setdefault(c.name, []).append(c.seconds * 1e3)
    # bare bash start-up, for comparison with the sandboxed one
    bare = []
    for _ in range(20):
        t = time.monotonic()
        subprocess.run(["/bin/bash", "-c", "ls kernels >/dev/null 2>&1; echo ok"], capture_output=True)
        bare.append((time.monotonic() - t) * 1e3)
    # compaction cost on a long history
    win = ContextWindow(args.context_tokens - 8192, tools=TOOLS)
    win.add(Message(role="system", content="S" * 20_000))
    win.add(Message(role="user", content="go"))
    for i in range(300):
        win.add(Message(role="assistant", content="a" * 500,
                        tool_calls=[ToolCall(id=f"c{i}", name="bash", arguments={"command": "x"})]))
        win.add(Message(role="tool", content="o" * 8000, tool_call_id=f"c{i}", name="bash"))
    t = time.monotonic()
    comp = win.fit(turn=300)
    compaction_ms = (time.monotonic() - t) * 1e3
    result = {
        "machine": f"{platform.processor() or platform.machine()}, {__import__('os').cpu_count()} cores",
        "command": f"python bench/agent_overhead.py --turns {args.turns} --bash-every {args.bash_every}",
        "turns": len(turns), "episode_wall_s": round(wall, 2), "stop_reason": traj.stop_reason,
        "final_eval_s_excluded": round(traj.evaluations[-1].seconds, 2) if traj.evaluations else None,
        "loop_ms_per_turn": {"median": round(statistics.median(loop), 3), "p95": round(pct(loop, 0.95), 3),
                             "max": round(max(loop), 3), "mean": round(statistics.fmean(loop), 3)},
        "tool_ms": {k: {"n": len(v), "median": round(statistics.median(v), 3), "p95": round(pct(v, 0.95), 3)}
                    for k, v in sorted(per_tool.items())},
        "bare_bash_ms_median": round(statistics.median(bare), 2),
        "sandbox": traj.environment.get("tools"),
        "context_tokens_last_turn": turns[-1].context_tokens if turns else 0,
        "compactions_in_episode": len(traj.compactions),
        "compaction_300_turns": {"ms": round(compaction_ms, 2), "tokens_before": comp.tokens_before if comp else 0,
                                 "tokens_after": comp.tokens_after if comp else 0,
                                 "turns_dropped": comp.turns_dropped if comp else 0},
        "trajectory_json_bytes": len(traj.model_dump_json()),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
