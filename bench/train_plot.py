"""Plot and tabulate an RFT -> RL run (bench/train_gpu.sh): per RL step the mean reward, pass rate,
tool-call validity and grad norm (and per-task reward), the RFT loss curve, and the held-out result.

    python bench/train_plot.py rl_metrics.jsonl --rft rft_metrics.jsonl --heldout heldout.json \
        [--heldout-before heldout_before.json] -o plot.png

Prints a Markdown table of the RL steps (the one docs/training.md shows)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from cuda_agent.storage import read_jsonl


def rows(path: Path) -> list[dict]:
    return read_jsonl(path)  # [] when absent; a half-written last line is dropped


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("rl", type=Path)
    ap.add_argument("--rft", type=Path)
    ap.add_argument("--heldout", type=Path)
    ap.add_argument("--heldout-before", type=Path)
    ap.add_argument("-o", "--out", type=Path, required=True)
    a = ap.parse_args()
    rl = [r for r in rows(a.rl) if "env/reward_mean" in r]
    rft = [r for r in rows(a.rft) if "loss" in r] if a.rft else []
    held = json.loads(a.heldout.read_text()) if a.heldout and a.heldout.is_file() else {}
    before = json.loads(a.heldout_before.read_text()) if a.heldout_before and a.heldout_before.is_file() else {}
    steps_all = [r for r in rows(a.rl) if "loss" in r]

    cols = [("step", "step"), ("reward", "env/reward_mean"), ("pass", "env/pass_rate"),
            ("episodes w/ tool call", "env/episodes_with_tool_call"), ("tool calls ok", "env/tool_call_ok_rate"),
            ("grad norm", "grad_norm"), ("gen s", "time/generation_s"), ("tools s", "time/tools_s"),
            ("eval s", "time/evaluation_s"), ("update s", "time/update_s"), ("step s", "time/step_s"),
            ("tokens", "tokens/generated"), ("wall s", "wall_s")]
    tasks = sorted({k.split("/", 2)[2] for r in rl for k in r if k.startswith("env/task_reward/")})
    head = [c for c, _ in cols] + [f"reward {t}" for t in tasks]
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for r in rl:
        vals = [r.get(k) for _, k in cols] + [r.get(f"env/task_reward/{t}") for t in tasks]
        print("| " + " | ".join("" if v is None else f"{v:.3g}" if isinstance(v, float) else str(v) for v in vals) + " |")
    if rft:
        print(f"RFT: {len(rft)} logged steps, loss {rft[0]['loss']:.3f} -> {rft[-1]['loss']:.3f}")
    print(f"RL: {len(steps_all)} optimizer steps, {len(rl)} rollout batches"
          + (f", reward {rl[0]['env/reward_mean']:.3g} (first batch) -> {rl[-1]['env/reward_mean']:.3g} (last)" if rl else ""))
    for name, h in (("held-out before RL", before), ("held-out after RL", held)):
        if not h:
            continue
        print(f"{name}: " + ", ".join(f"{k.split('/', 1)[1]} {v:.3g}" for k, v in h.items()
                                    if k.startswith("heldout/") and isinstance(v, (int, float))
                                    and k.split("/", 1)[1] in ("episodes", "reward_mean", "pass_rate",
                                                               "episodes_with_tool_call")))

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 4, figsize=(20, 4))
    if rft:
        ax[0].plot([r["step"] for r in rft], [r["loss"] for r in rft])
        ax[0].set(title="RFT (SFT on demos): loss", xlabel="step", yscale="log")
    steps = [r["step"] for r in rl]
    ax[1].plot(steps, [r["env/reward_mean"] for r in rl], "o-", label="mean reward")
    for t in tasks:
        ax[1].plot(steps, [r.get(f"env/task_reward/{t}") for r in rl], ".--", alpha=0.6, label=t)
    if held.get("heldout/reward_mean") is not None:
        ax[1].axhline(held["heldout/reward_mean"], color="gray", ls=":", label="held-out (final policy)")
    if before.get("heldout/reward_mean") is not None:
        ax[1].axhline(before["heldout/reward_mean"], color="tab:red", ls=":", label="held-out (before RL)")
    ax[1].set(title="RL (GRPO): reward per step", xlabel="optimizer step", ylim=(-1.1, 3.1))
    ax[1].legend(fontsize=8)
    ax[2].plot(steps, [r.get("env/pass_rate") for r in rl], "o-", label="pass rate")
    ax[2].plot(steps, [r.get("env/episodes_with_tool_call") for r in rl], "s-", label="episodes with a tool call")
    ax[2].plot(steps, [r.get("env/tool_call_ok_rate") for r in rl], "^-", label="tool calls ok")
    g = ax[2].twinx()
    g.plot(steps, [r.get("grad_norm") for r in rl], "k:", label="grad norm")
    g.set_ylabel("grad norm")
    ax[2].set(title="RL: validity, pass rate, grad norm", xlabel="optimizer step", ylim=(-0.05, 1.05))
    ax[2].legend(fontsize=8, loc="lower right")
    # where each step's time went (issue 26): stacked seconds by phase
    xs = [r["step"] for r in steps_all]
    bottom = [0.0] * len(xs)
    for label, key in (("generation", "time/generation_s"), ("tools", "time/tools_s"),
                       ("evaluation", "time/evaluation_s"), ("other rollout", "time/rollout_other_s"),
                       ("update", "time/update_s")):
        vals = [float(r.get(key) or 0.0) for r in steps_all]
        ax[3].bar(xs, vals, bottom=bottom, label=label)
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax[3].set(title="RL: seconds per step by phase", xlabel="optimizer step", ylabel="s")
    ax[3].legend(fontsize=8)
    fig.tight_layout()
    a.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(a.out, dpi=110)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
