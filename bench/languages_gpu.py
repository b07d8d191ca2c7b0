"""Issue 14 item 1 on the GPU: Triton solutions beside the CUDA C++ ones, the Triton attack
catalogue against the judge, and the paper's agent_workdir (tests/fixtures) adopted unchanged.
Each evaluation is appended to OUT/languages.jsonl as it finishes; the last line says which
expectations held. Usage: python3 bench/languages_gpu.py --out DIR [--only triton cuda attacks paper]"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests/ (the attack catalogue and the paper fixture)

from cuda_agent.evaluation import EvalConfig, GuardConfig, evaluate  # noqa: E402
from cuda_agent.examples import get_example  # noqa: E402
from cuda_agent.tasks import Task  # noqa: E402
from cuda_agent.workspace import adopt_workspace, create_workspace  # noqa: E402
from tests.languages.triton.catalogue import RUNTIME_ATTACKS  # noqa: E402

EXAMPLES = ("swish", "softmax", "layernorm", "sum_reduction")


def record(out: Path, kind: str, name: str, res, expect: str | None = None, ok: bool | None = None) -> dict:
    row = {"kind": kind, "name": name, "reward": res.reward, "correct": res.correct, "stage": res.stage,
           "reason": res.reason[:600], "time_ms": res.time_ms.model_dump() if res.time_ms else None,
           "speedup_vs_eager": res.speedup_vs_eager, "speedup_vs_compile": res.speedup_vs_compile,
           "seconds": round(res.seconds, 1), "sandbox": res.sandbox, "expect": expect, "held": ok,
           "worker_log": res.worker_log[-1500:] if res.reward == -1 else ""}
    with open(out / "languages.jsonl", "a") as fh:
        fh.write(json.dumps(row, default=str) + "\n")
    print(f"{kind:8s} {name:48s} reward {res.reward:>2} {res.stage:8s} {res.seconds:6.1f}s "
          f"{'' if ok is None else ('HELD' if ok else 'NOT HELD')} {res.reason[:160]!r}", flush=True)
    return row


def solution(tmp: Path, example: str, language: str, cfg: EvalConfig):
    ex = get_example(example)
    ws = create_workspace(ex.task, tmp / f"{example}-{language}", "cuda", language=language)
    ex.install_solution(ws.root, "triton" if language == "triton" else "cuda")
    return evaluate(ws, cfg)


def attack(tmp: Path, name: str, kernel: str, static_on: bool):
    ex = get_example("swish")
    ws = create_workspace(ex.task, tmp / f"attack-{abs(hash(name))}", "cuda", language="triton")
    shutil.copyfile(ex.solution_dir("triton") / "model_new.py", ws.root / "model_new.py")
    (ws.root / "kernels" / "swish.py").write_text(kernel)
    cfg = EvalConfig(backend="cuda", guards=GuardConfig(static_checks=static_on))
    return evaluate(ws, cfg)


def caught(expect: str, res, honest_ms: float | None) -> bool:
    if expect == "stream":  # all work counted: no better than the honest kernel, or refused
        cand = res.time_ms.candidate if res.time_ms else None
        return res.reward == -1 or (honest_ms is not None and cand is not None and cand >= 0.8 * honest_ms)
    return res.reward == -1


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--only", nargs="*", default=["triton", "cuda", "attacks", "paper"])
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="languages-"))
    cfg = EvalConfig(backend="cuda")
    held: dict[str, bool] = {}
    honest_swish_ms = None
    t0 = time.monotonic()
    for language in [lang for lang in ("triton", "cuda") if lang in args.only]:
        for example in EXAMPLES:
            res = solution(tmp, example, "triton" if language == "triton" else "cpp", cfg)
            row = record(args.out, language, example, res, "reward >= 1", res.reward >= 1)
            held[f"{language}/{example}"] = res.reward >= 1
            if language == "triton" and example == "swish" and row["time_ms"]:
                honest_swish_ms = row["time_ms"]["candidate"]
    if "attacks" in args.only:
        for name, (expect, kernel, static_on) in RUNTIME_ATTACKS.items():
            res = attack(tmp, name, kernel, static_on)
            ok = caught(expect, res, honest_swish_ms)
            record(args.out, "attack", name, res, expect, ok)
            held[f"attack/{name}"] = ok
    if "paper" in args.only:
        root = tmp / "agent_workdir"
        shutil.copytree(ROOT / "tests" / "fixtures" / "paper_agent_workdir", root)
        task = Task.from_source((root / "model.py").read_text(), name="paper/axpby")
        ws = adopt_workspace(root, task, "cuda", "paper")
        res = evaluate(ws, cfg)
        record(args.out, "paper", "agent_workdir axpby", res, "reward >= 1", res.reward >= 1)
        held["paper"] = res.reward >= 1
    summary = {"held": sum(held.values()), "of": len(held), "not_held": [k for k, v in held.items() if not v],
               "seconds": round(time.monotonic() - t0, 1)}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
