"""A device slot: one long-lived process per GPU (`python -m cuda_agent.benchmark.slot PARENT_PID`).

The local pool starts one per device with CUDA_VISIBLE_DEVICES set to that device, so every
evaluation worker it spawns sees that GPU alone. It reads one job per line on stdin and
answers one TaskRecord per line on its original stdout; anything else it or a library
prints goes to stderr (the slot's log). It dies with the driver (PR_SET_PDEATHSIG): a killed
driver leaves no slot behind, and finished records are already in the store.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from ..isolation.processes import die_with_parent


def main() -> None:
    parent = int(sys.argv[1]) if len(sys.argv) > 1 else os.getppid()
    die_with_parent(parent)
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # stray prints (libraries, compilers) must not corrupt the reply stream
    sys.stdout = sys.stderr

    from .jobs import device_stage
    from .records import Job

    for line in sys.stdin:
        if not line.strip():
            continue
        msg = json.loads(line)
        job = Job.model_validate(msg["job"])
        record = device_stage(job, Path(msg["directory"]))
        replies.write(record.model_dump_json() + "\n")


if __name__ == "__main__":
    main()
