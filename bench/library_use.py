"""Which vendor libraries a task's Model really starts, against what its source's words say
(`judge.libraries_for`): a client starts the words' libraries before it loads, on a new task's
critical path, so a word that starts a library the model never uses costs that library's start
(cuBLAS 0.06-0.08 s, cuDNN 0.08-0.13 s on an H100) for nothing, and a miss moves the start into
the model's first call (the same cost, still outside every timed interval).

Each task in a fresh process: its Model's first forward on inputs made on the device, then the
first convolution and the first matmul of the process timed; a library the forward started
answers in a few ms (< `--started-ms`: the new shape's kernel loaded lazily), one it did not pays its
start there (58-400 ms on an H100 with eight probes at once).

    python bench/library_use.py LIST.txt [--jobs 4] [--out FILE.jsonl]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent

PROBE = r"""
import json, sys, time, importlib.util, torch
path = sys.argv[1]
spec = importlib.util.spec_from_file_location("task", path)
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
torch.cuda.init(); torch.zeros(1, device="cuda"); torch.cuda.synchronize()
with torch.device("cuda"):
    args = mod.get_init_inputs() if hasattr(mod, "get_init_inputs") else []
    model = mod.Model(*args).cuda().eval()
    inputs = mod.get_inputs()
t0 = time.perf_counter()
with torch.no_grad():
    model(*inputs)
torch.cuda.synchronize()
forward_ms = (time.perf_counter() - t0) * 1e3
del inputs
x = torch.ones(1, 1, 8, 8, device="cuda")
out = {"forward_ms": round(forward_ms, 1)}
for name, call in (("cudnn", lambda: torch.nn.functional.conv2d(x, torch.ones(1, 1, 3, 3, device="cuda"))),
                   ("cublas", lambda: x[0, 0] @ x[0, 0])):
    t0 = time.perf_counter(); call(); torch.cuda.synchronize()
    out[name + "_ms"] = round((time.perf_counter() - t0) * 1e3, 2)
print(json.dumps(out))
"""


def probe(task: Path, started_ms: float, timeout_s: float) -> dict:
    from cuda_agent.evaluation.judge import libraries_for

    row: dict = {"task": f"{task.parent.name}/{task.stem}", "words": libraries_for(task.read_text())}
    try:
        proc = subprocess.run([sys.executable, "-c", PROBE, str(task)], capture_output=True, text=True,
                              timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {**row, "error": f"timed out after {timeout_s:.0f} s"}
    if proc.returncode != 0:
        return {**row, "error": proc.stderr.strip().splitlines()[-1][:200] if proc.stderr.strip() else proc.returncode}
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    used = [lib for lib in ("cudnn", "cublas") if got[f"{lib}_ms"] < started_ms]
    return {**row, **got, "started_by_model": used,
            "warmed_for_nothing": [lib for lib in row["words"] if lib not in used],
            "missed": [lib for lib in used if lib not in row["words"]]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kb_list", type=Path)
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--started-ms", type=float, default=40.0, help="a first call under this: the library was started")
    ap.add_argument("--timeout-s", type=float, default=120.0)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    tasks = [(args.kb_list.parent / line.strip()).resolve() for line in args.kb_list.read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        rows = list(pool.map(lambda t: probe(t, args.started_ms, args.timeout_s), tasks))
    for row in rows:
        print(json.dumps(row), flush=True)
    if args.out:
        args.out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    nothing = [r["task"] for r in rows if r.get("warmed_for_nothing")]
    missed = [r["task"] for r in rows if r.get("missed")]
    print(f"LIBRARY_USE {len(rows)} tasks, {sum('error' in r for r in rows)} errors; words warm a library the model "
          f"never starts: {len(nothing)} {nothing}; the model starts one the words miss: {len(missed)} {missed}")


if __name__ == "__main__":
    main()
