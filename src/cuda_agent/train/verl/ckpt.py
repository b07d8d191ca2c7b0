"""Stage chaining through verl 0.9.1's checkpoint layout: under a stage's
`trainer.default_local_dir`, `latest_checkpointed_iteration.txt` names the last finished step N
and `global_step_N/{actor,critic}` (the SFT trainer: `global_step_N/` itself) hold its shards;
there is never a `latest/`. `merge_latest` turns that step into a Hugging Face folder with verl's
model merger; `launch.sh` runs `python3 -m cuda_agent.train.verl.ckpt STAGE_DIR ROLE TARGET`.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

TRACKER = "latest_checkpointed_iteration.txt"
ROLES = ("actor", "critic", "model")  # "model": the SFT trainer's step folder itself


def latest_step(stage_dir: str | Path) -> int:
    """The step in `latest_checkpointed_iteration.txt`; a clear error when the stage never saved."""
    tracker = Path(stage_dir) / TRACKER
    if not tracker.is_file():
        raise FileNotFoundError(f"{tracker} does not exist: the stage has not saved a checkpoint "
                                "(verl writes it after each save; check trainer.save_freq and that the stage ran)")
    text = tracker.read_text().strip()
    if not text.isdigit():
        raise ValueError(f"{tracker} holds {text!r}, not a step number")
    return int(text)


def latest_checkpoint(stage_dir: str | Path, role: str = "actor") -> Path:
    """`STAGE_DIR/global_step_N/<role>` for the latest N (`role="model"`: the step folder itself)."""
    if role not in ROLES:
        raise ValueError(f"role {role!r}: one of {', '.join(ROLES)}")
    step_dir = Path(stage_dir) / f"global_step_{latest_step(stage_dir)}"
    path = step_dir if role == "model" else step_dir / role
    if not path.is_dir():
        raise FileNotFoundError(f"{path} does not exist although {Path(stage_dir) / TRACKER} names step "
                                f"{latest_step(stage_dir)}")
    return path


def merge_command(stage_dir: str | Path, role: str, target_dir: str | Path, backend: str = "fsdp",
                  python: str = sys.executable) -> list[str]:
    """verl's model merger on the latest checkpoint of `role`."""
    return [python, "-m", "verl.model_merger", "merge", "--backend", backend,
            "--local_dir", str(latest_checkpoint(stage_dir, role)), "--target_dir", str(target_dir)]


def merge_latest(stage_dir: str | Path, role: str, target_dir: str | Path, backend: str = "fsdp") -> Path:
    subprocess.run(merge_command(stage_dir, role, target_dir, backend), check=True)
    return Path(target_dir)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m cuda_agent.train.verl.ckpt",
                                 description="merge a verl stage's latest checkpoint into a Hugging Face folder")
    ap.add_argument("stage_dir")
    ap.add_argument("role", choices=ROLES)
    ap.add_argument("target_dir")
    ap.add_argument("--backend", default="fsdp", choices=["fsdp", "megatron"])
    ap.add_argument("--print-only", action="store_true", help="print the resolved checkpoint folder and exit")
    a = ap.parse_args(argv)
    try:
        if a.print_only:
            print(latest_checkpoint(a.stage_dir, a.role))
            return 0
        merge_latest(a.stage_dir, a.role, a.target_dir, a.backend)
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except subprocess.CalledProcessError as exc:
        return exc.returncode or 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
