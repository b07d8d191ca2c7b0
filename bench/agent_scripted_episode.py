"""One agent episode with a scripted policy that writes a bundled example's hand-written
solution, compiles, verifies and profiles it, then stops: the whole loop (tools, sandboxed bash,
trusted evaluations, best-state snapshot, final reward) on a real backend with no model.

    python bench/agent_scripted_episode.py --backend cuda --example swish --out runs/scripted
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from cuda_agent.agent import AgentConfig, ScriptedPolicy, TrajectoryWriter, run_episode
from cuda_agent.agent.policies import reply
from cuda_agent.evaluation import EvalConfig
from cuda_agent.examples import get_example


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--example", default="swish")
    ap.add_argument("--out", type=Path, default=Path("runs/scripted"))
    ap.add_argument("--no-compile-baseline", action="store_true")
    args = ap.parse_args()
    ex = get_example(args.example)
    sol = ex.solution_dir(args.backend)
    files = {"model_new.py": (sol / "model_new.py").read_text()}
    files.update({f"kernels/{p.name}": p.read_text() for p in sorted((sol / "kernels").iterdir())})
    steps = [reply("Read the task.", ("read_file", {"path": "model.py"}), ("glob", {"pattern": "kernels/*"})),
             reply("Write the kernel.", *[("write_file", {"path": k, "content": v}) for k, v in files.items()]),
             reply("Build and check.", ("bash", {"command": "./compile.sh && ./verify.sh"})),
             reply("Time it.", ("bash", {"command": "./profile.sh"})),
             reply("Done: the kernel is in kernels/.")]
    eval_cfg = EvalConfig(backend=args.backend, compile_mode=None if args.no_compile_baseline else "default")
    cfg = AgentConfig(backend=args.backend, max_turns=10, eval=eval_cfg)
    t0 = time.monotonic()
    traj = run_episode(ex.task, ScriptedPolicy(steps=steps), cfg, args.out / "episode")
    TrajectoryWriter(args.out / "trajectories.jsonl").append(traj)
    summary = traj.summary()
    summary["wall_s"] = round(time.monotonic() - t0, 1)
    summary["evaluations"] = [{"trigger": e.trigger, "turn": e.turn, "reward": e.result.reward,
                               "improved": e.improved, "seconds": round(e.seconds, 1),
                               "reason": e.result.reason.splitlines()[0] if e.result.reason else ""}
                              for e in traj.evaluations]
    summary["best"] = ({"turn": traj.best.turn, "reward": traj.best.result.reward, "files": traj.best.files}
                       if traj.best else None)
    summary["device"] = traj.final.device if traj.final else ""
    summary["turn_seconds"] = [{k: round(getattr(t, k), 3) for k in ("model_seconds", "tool_seconds", "eval_seconds",
                                                                     "loop_seconds")} for t in traj.turns]
    summary["tools_confinement"] = traj.environment.get("tools")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
