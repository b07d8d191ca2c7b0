"""The isolated worker: one fresh process per evaluation (`python -m cuda_agent.evaluation.worker`).

Order matters. Everything trusted happens before candidate code is imported: the reference
is loaded from the task source the parent sent (never from the workspace), its outputs are
computed and shipped to the parent, baselines are warmed. Only after the parent says
"proceed" is the candidate's extension loaded and `model_new.py` imported. The worker
never judges correctness or reward: it ships evidence (outputs, per-round times) and the
parent decides.
"""

from __future__ import annotations

import copy
import gc
import json
import os
import sys
import time
import traceback
import types
from pathlib import Path
from typing import Any, Callable

from . import channel


def main() -> None:
    out_fd, backend_name = int(sys.argv[1]), sys.argv[2]
    import torch  # imported, and the device initialised, while the worker waits as a spare

    if backend_name == "cuda" and torch.cuda.is_available():
        torch.empty(1, device="cuda")

    line = sys.stdin.readline()
    if not line.strip():
        os._exit(0)  # the parent went away without using this spare
    request = json.loads(line)
    sandbox = _enter_sandbox(request)
    try:
        _Session(request, out_fd, sandbox).run()
    except _Stop:
        pass
    except BaseException as exc:  # report, then exit: the parent decides what it means
        _safe_send(out_fd, {"type": "error", "stage": "worker", "message": _describe(exc)})
    finally:
        os._exit(0)


class _Stop(Exception):
    pass


class _Session:
    def __init__(self, request: dict[str, Any], out_fd: int, sandbox: dict[str, Any]) -> None:
        self.req = request
        self.fd = out_fd
        self.stage = "load"
        self.sandbox = sandbox

    def send(self, msg: dict[str, Any]) -> None:
        channel.send(self.fd, msg)

    def wait_for(self, expected: str) -> str:
        line = sys.stdin.readline().strip()
        if line != expected:
            raise _Stop()
        return line

    def fail(self, stage: str, message: str) -> None:
        self.send({"type": "error", "stage": stage, "message": message})
        raise _Stop()

    def run(self) -> None:
        import torch

        from ..backends import get_backend
        from ..workspace.extension import install_extension_module
        from .config import EvalConfig
        from .guards import GuardViolation, guarded, inputs_changed
        from .verify import Tolerance, compare_outputs
        from .timing import time_host_clock, time_interleaved

        cfg = EvalConfig.model_validate(self.req["config"])
        backend = get_backend(self.req["backend"])
        if not backend.is_available():
            self.fail("worker", f"backend {backend.name} is not available on this machine")
        device = torch.device(backend.torch_device)
        self.send({"type": "hello", "device": backend.device_name(), "torch": torch.__version__,
                   "sandbox": self.sandbox})

        # ---- trusted phase: reference only ------------------------------------------------
        ref_module = _module_from_source("reference_task", self.req["task_source"])
        torch.manual_seed(cfg.seed)
        init_inputs = ref_module.get_init_inputs()
        reference = ref_module.Model(*init_inputs).to(device).eval()
        trial_inputs = []
        ref_inputs_after: list[list[Any] | None] = []  # only kept where the reference mutates
        with torch.no_grad():
            for i, seed in enumerate(cfg.trial_seeds()):
                inputs = _make_inputs(ref_module, seed, device)
                args = _clone(inputs)
                out = reference(*args)
                backend.synchronize()
                ref_inputs_after.append(args if inputs_changed(inputs, args) else None)
                self.send({"type": "reference", "trial": i, "seed": seed, "output": out})
                del out
                trial_inputs.append(inputs)

        timed_sets: list[list[Any]] = []
        compiled = None
        if cfg.measure:
            timed_sets = _timing_input_sets(trial_inputs, cfg)
            if self.req["measure_compile"]:
                compiled = torch.compile(reference, mode=cfg.compile_mode)
                with torch.no_grad():
                    compiled(*_clone(timed_sets[0]))  # compile outside any timed region
                backend.synchronize()
        self.send({"type": "reference_done", "work": _work_of(torch, reference, trial_inputs[0], backend)})
        self.wait_for("proceed")
        from .integrity import changed_entries, thread_count, timing_fingerprint

        fingerprint = timing_fingerprint(backend)  # before any candidate code exists

        # ---- candidate phase --------------------------------------------------------------
        gc.collect()
        self.stage = "load"
        ws = Path(self.req["workspace"])
        install_extension_module(backend.extension_name, self.req["library"])
        sys.path.insert(0, str(ws))
        try:
            cand_module = _module_from_file("model_new", ws / "model_new.py")
            model_cls = getattr(cand_module, "ModelNew", None)
            if model_cls is None:
                self.fail("load", "model_new.py defines no class ModelNew")
            torch.manual_seed(cfg.seed)
            candidate = model_cls(*copy.deepcopy(init_inputs))
            candidate.load_state_dict(reference.state_dict(), strict=True)
            candidate = candidate.to(device).eval()
        except _Stop:
            raise
        except BaseException as exc:
            self.fail("load", _describe(exc))

        self.stage = "verify"
        poison_bytes = self.req.get("poison_bytes", 0)
        run_candidate = guarded(candidate) if cfg.guards.torch_compute else candidate
        with torch.no_grad():
            for i, inputs in enumerate(trial_inputs):
                args = _clone(inputs)
                _poison_free_memory(torch, device, poison_bytes)
                try:
                    out = run_candidate(*args)
                    backend.synchronize()
                except GuardViolation as exc:
                    self.fail("guard", str(exc))
                except BaseException as exc:
                    self.fail("verify", f"trial {i}: {_describe(exc)}")
                expected = ref_inputs_after[i] or inputs
                changed = inputs_changed(expected, args) if cfg.guards.input_mutation else None
                if changed:
                    self.fail("guard", f"input mutation: the candidate modified its inputs ({changed}) "
                                       "where the reference did not")
                self.send({"type": "candidate", "trial": i, "output": out})
                del out
        self.send({"type": "candidate_done"})

        # ---- timing: "time" (all models), "baseline" (reference only), anything else stops --
        # The parent may ask again ("time" after "time"): a flagged result is re-measured.
        tol = Tolerance(atol=self.req.get("atol", cfg.atol), rtol=self.req.get("rtol", cfg.rtol))
        vary = _input_variation(torch, cfg.seed) if cfg.guards.fresh_values else None
        checked = {"candidate": _no_lingering_threads(run_candidate, thread_count)}
        while True:
            command = sys.stdin.readline().strip()
            self.stage = "time"
            models: dict[str, Callable[..., Any]] = {"eager": reference}
            if command == "time":
                models["candidate"] = candidate
            elif command != "baseline" or compiled is None:
                return
            if compiled is not None:
                models["compile"] = compiled
            sets = {name: [_clone(s) for s in timed_sets] for name in models}

            def recheck(outs: dict[str, Any]) -> None:
                """Outputs produced while being timed must still be right (no caching, no skipping)."""
                if "candidate" in outs and "eager" in outs:
                    cmp = compare_outputs(outs["eager"], outs["candidate"], tol)
                    if not cmp.ok:
                        raise GuardViolation(f"output produced while being timed is wrong ({cmp.message}): "
                                             "cached or skipped work")

            try:
                with torch.no_grad():
                    samples = time_interleaved(backend, models, sets, cfg.timing, check_round=recheck,
                                               fresh_inputs=frozenset(models),  # all alike: a fresh copy is cache-hot
                                               checked_models=checked, vary=vary)
                    if "candidate" in models and cfg.guards.host_clock and not backend.timer_is_host_clock:
                        pair = {n: models[n] for n in ("eager", "candidate")}
                        host = time_host_clock(backend, pair, {n: sets[n] for n in pair}, cfg.timing.host_trials)
                        samples.update({f"host:{n}": v for n, v in host.items()})
            except GuardViolation as exc:
                self.fail("guard", f"while being timed: {exc}")
            except BaseException as exc:
                self.fail("time", _describe(exc))
            if "candidate" in models and cfg.guards.timer_integrity:
                patched = changed_entries(fingerprint, timing_fingerprint(backend))
                if patched:
                    self.fail("guard", "timer patched: candidate code changed the timing path: "
                                       + ", ".join(patched[:8]))
            self.send({"type": "timing", "samples": samples})


# ---- helpers ------------------------------------------------------------------------------
def _module_from_source(name: str, source: str) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__file__ = f"<{name}>"
    sys.modules[name] = module
    exec(compile(source, f"<{name}>", "exec"), module.__dict__)
    return module


def _module_from_file(name: str, path: Path) -> types.ModuleType:
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path.name}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _make_inputs(module: types.ModuleType, seed: int, device: Any) -> list[Any]:
    """Fresh inputs made directly on the device (CPU generation of large tensors costs
    seconds per evaluation); the seed fixes them either way."""
    import torch

    torch.manual_seed(seed)
    with device:
        inputs = module.get_inputs()
    return [x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs]


def _clone(inputs: list[Any]) -> list[Any]:
    import torch

    return [x.clone() if isinstance(x, torch.Tensor) else copy.deepcopy(x) for x in inputs]


def _timing_input_sets(trial_inputs: list[list[Any]], cfg: Any) -> list[list[Any]]:
    """Rotate through several input sets (not one reused object) within a memory cap."""
    import torch

    per_set = sum(x.numel() * x.element_size() for x in trial_inputs[0] if isinstance(x, torch.Tensor))
    n = max(1, min(cfg.timing.input_sets, len(trial_inputs), cfg.timing.input_set_bytes // max(per_set, 1)))
    return trial_inputs[:n]


def _work_of(torch: Any, reference: Any, inputs: list[Any], backend: Any) -> dict[str, float]:
    """Least bytes any implementation must move (inputs read once, outputs written once) and
    the matmul / conv flops the reference performs: with the device's peak rates, a time
    no honest kernel can beat (the speed-of-light check)."""
    from torch.utils.flop_counter import FlopCounterMode

    def nbytes(obj: Any) -> int:
        if isinstance(obj, torch.Tensor):
            return obj.numel() * obj.element_size()
        if isinstance(obj, (list, tuple)):
            return sum(nbytes(o) for o in obj)
        if isinstance(obj, dict):
            return sum(nbytes(o) for o in obj.values())
        return 0

    flops = 0
    try:
        counter = FlopCounterMode(display=False)
        with torch.no_grad(), counter:
            out = reference(*_clone(inputs))
        flops = int(counter.get_total_flops())
    except Exception:  # counting is best effort; bytes alone still bound the time
        with torch.no_grad():
            out = reference(*_clone(inputs))
    backend.synchronize()
    peaks = backend.peak_rates()
    return {"bytes": float(nbytes(inputs) + nbytes(out)), "flops": float(flops),
            "peak_bytes_per_s": float(peaks[0]) if peaks else 0.0, "peak_flops": float(peaks[1]) if peaks else 0.0}


def _input_variation(torch: Any, seed: int) -> Callable[[Any, int], list[Any]]:
    """New values every round: floating inputs scaled elementwise by (1 + u/100), u in [-1, 1]
    (signs and zeros kept, so domain constraints such as positivity still hold). A result
    cached by content fingerprint never matches again."""
    generators: dict[Any, Any] = {}

    def vary(inputs: Any, round_index: int) -> list[Any]:
        out = []
        for i, x in enumerate(inputs):
            if isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel() > 0:
                gen = generators.get(x.device)
                if gen is None:
                    gen = generators[x.device] = torch.Generator(device=x.device)
                gen.manual_seed(seed * 1_000_003 + round_index * 101 + i)
                scale = torch.rand(x.shape, generator=gen, device=x.device, dtype=torch.float32)
                out.append((x.float() * scale.mul_(0.02).add_(0.99)).to(x.dtype))
            else:
                out.append(x)
        return out

    return vary


def _no_lingering_threads(fn: Callable[..., Any], thread_count: Callable[[], int]) -> Callable[..., Any]:
    """On check rounds: a thread the call started and left running does work outside the
    timed region (the timer stopped when the call returned)."""
    from .guards import GuardViolation

    def call(*args: Any) -> Any:
        before = thread_count()
        out = fn(*args)
        after = thread_count()
        deadline = time.perf_counter() + 0.002  # a joined thread may take a moment to leave /proc
        while before >= 0 and after > before and time.perf_counter() < deadline:
            time.sleep(0.0002)
            after = thread_count()
        if before >= 0 and after > before:
            raise GuardViolation(f"work on another thread: {after - before} thread(s) the candidate started "
                                 "were still running after forward returned")
        return out

    return call


def _poison_free_memory(torch: Any, device: Any, nbytes: int) -> None:
    """Fill memory the allocator will hand out next with NaN, so an output the candidate
    allocates but never writes cannot inherit a previous result (the caching-allocator hack)."""
    if nbytes <= 0:
        return
    block = torch.empty(nbytes // 4 + 1, dtype=torch.float32, device=device)
    block.fill_(float("nan"))
    del block


def _describe(exc: BaseException) -> str:
    """Exception type, message and the last frames, short enough for a model to read."""
    tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
    text = "".join(tb[-3:]) if len(tb) > 3 else "".join(tb)
    return text[-3000:].strip()


def _safe_send(fd: int, msg: dict[str, Any]) -> None:
    try:
        channel.send(fd, msg)
    except OSError:
        pass


def _enter_sandbox(request: dict[str, Any]) -> dict[str, Any]:
    """Limits and write restrictions, before any thread pool exists (threads started later
    inherit them; see sandbox.py). The parent adds memory and process watchdogs on top."""
    from . import sandbox

    limits = request.get("limits", {})
    report = sandbox.apply_limits(limits.get("file_size_bytes"), limits.get("cpu_seconds"),
                                  limits.get("open_files"), limits.get("processes"),
                                  request.get("address_space_limit"))
    writable = request.get("writable")
    if writable is not None:
        scratch = Path(os.environ.get("HOME", "/nonexistent"))
        paths = [p for p in [scratch, *map(Path, writable)] if p.exists()]
        report.update(sandbox.restrict_writes(paths))
    return report


if __name__ == "__main__":
    main()
