"""Round 21: the judge's task load (`Judge.task_state`: `_check_inputs_move`, `declared_fixed`, `_ImportedAgain`)
run for real, in this process, on the CPU backend, without any client: verdict, constants, and whether the
source runs again per draw. Fast (no evaluation). Used by cases.py."""
from __future__ import annotations

import hashlib
import json
import time
import traceback
from pathlib import Path

from cuda_agent.evaluation import EvalConfig
from cuda_agent.evaluation.judge import Judge, JudgeError, _ImportedAgain
from cuda_agent.evaluation.protocol import JudgeRequest

HERE = Path(__file__).resolve().parent
_JUDGE: Judge | None = None


def judge() -> Judge:
    global _JUDGE
    if _JUDGE is None:
        _JUDGE = Judge("cpu")
    return _JUDGE


def load(name: str, source: str, precision: str | None = None) -> dict:
    j = judge()
    cfg = EvalConfig(backend="cpu")
    req = JudgeRequest(config=cfg, task_source=source, task_hash=hashlib.sha256(source.encode()).hexdigest(),
                       precision=precision, workspace="/nonexistent")
    t0 = time.perf_counter()
    row: dict = {"case": name}
    try:
        st = j.task_state(req, cfg)
        row.update(verdict="ok", fixed_parts=sorted(st.fixed_parts), imported_again=isinstance(st.module, _ImportedAgain),
                   draws=st.draws, ref_varies=st.ref_varies)
    except JudgeError as exc:
        row.update(verdict="refused", why=str(exc)[:500])
    except Exception as exc:  # noqa: BLE001 - the judge itself broke: a finding
        row.update(verdict="CRASH", why=f"{type(exc).__name__}: {exc}"[:500], tb=traceback.format_exc()[-800:])
    finally:
        j.state = None
    row["s"] = round(time.perf_counter() - t0, 2)
    return row
