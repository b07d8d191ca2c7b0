"""The candidate process (`python -m cuda_agent.evaluation.candidate SOCKET_FD BACKEND`).

A sandboxed client of the judge. It imports torch and starts the device while it waits as a
spare; on its request it enters the sandbox, maps the judge's input arena, loads the built
library and `model_new.py`, takes the reference's weights from the arena, and then runs
`ModelNew.forward` on the arena slots it is told to, answering with *where* each output is.
Nothing it says is evidence: the judge times it with its own clock, reads the outputs from
outside this process and compares them on the device. This file is trusted code running in
an untrusted process; once candidate code is imported it may have been replaced wholesale.
"""

from __future__ import annotations

import json
import os
import socket
import select
import sys
import time
import traceback
import types
from pathlib import Path
from typing import Any

from ..isolation.sandbox import CONFINE_WRITES_ENV

MAX_MESSAGE = 1 << 22


def main() -> None:
    """A client started as its own interpreter (where no fork server can fork one)."""
    trusted_sys_path()
    serve(int(sys.argv[1]), sys.argv[2])


def serve(sock_fd: int, backend_name: str, marks: list[tuple[str, float]] | None = None, held: bool = False) -> None:
    """Confine writes, start the device, say "spare", then serve the judge's one request. Runs
    in a fresh interpreter (`main`) or in a child of the fork server, torch already imported
    (`marks`: the fork server's steps in this child so far, as (name, perf_counter)). `held`
    (a GPU spare forked for a later evaluation): start the driver only, say "held", and make the
    device context once the judge says "go" (or sends its request): the driver's start (~0.13 s
    on an H100) holds no device memory, a context ~0.5 GiB (issue 23, twelfth session)."""
    from ..isolation.sandbox import drop_capabilities

    marks = marks or [("begin", time.perf_counter())]
    capabilities = drop_capabilities()  # one thread yet: every thread the device starts inherits none
    early = _confine_writes_early() if os.environ.get(CONFINE_WRITES_ENV) else None
    marks.append(("confine", time.perf_counter()))
    import torch  # imported, and the device started, while this process waits as a spare

    from ..backends import get_backend

    backend = get_backend(backend_name)
    sock = socket.socket(fileno=sock_fd)
    pending = None  # a request that came while held: served once the device is up
    if held:
        backend.start_driver()  # (nothing on a CPU)
        marks.append(("driver", time.perf_counter()))
        try:
            sock.send(json.dumps({"type": "held"}).encode())
            pending = _receive(sock)
        except (OSError, ValueError):
            os._exit(0)  # the judge went away without using this spare
        if pending[0].get("type") == "go":
            pending = None
        elif pending[0].get("type") != "start":
            os._exit(0)
        marks.append(("held", time.perf_counter()))
    backend.start_device()
    marks.append(("device", time.perf_counter()))
    if backend.gpu:  # where spares start ahead of need; on a small CPU host unused spares would burn its cores
        warm_up_harness(torch, backend.torch_device, marks)
        backend.synchronize()
    warmed: set[str] = set()
    try:
        # started: the judge prefers a spare that said so. Where its start spent its time, as this
        # process saw it: a claim, for diagnosis only
        sock.send(json.dumps({"type": "spare", "steps_s": _steps(marks)}).encode())
        if backend.gpu and pending is None:  # idle: every library ahead of need, one at a time while no request waits
            from .judge import LIBRARIES, warm_up_libraries

            for library in LIBRARIES:
                if select.select([sock], [], [], 0)[0]:
                    break
                try:
                    warm_up_libraries(torch, backend.torch_device, only=(library,))
                except Exception:  # noqa: BLE001 - left to the load, which says what failed, and to whom
                    break
                warmed.add(library)
        request, fds = pending or _receive(sock)
    except (OSError, ValueError):
        os._exit(0)  # the judge went away without using this spare
    if request.get("type") != "start":
        os._exit(0)
    session = _Session(sock, backend, request, early, capabilities)
    session.warmed = warmed
    try:
        session.start(fds)
        session.serve()
    except _Stop:
        pass
    except BaseException as exc:  # report, then exit: the judge decides what it means
        session.send({"type": "error", "stage": session.stage, "message": describe_exception(exc)})
    finally:
        os._exit(0)


def warm_up_harness(torch: Any, device: str, marks: list[tuple[str, float]] | None = None) -> None:
    """What the harness's first calls import (the dispatcher guard pulls in ~800 modules, ~2 s),
    done before any workspace is on sys.path: in a spare on its device, or in the fork server on
    "meta". (cuDNN and cuBLAS a GPU spare starts once it has said it is up: all while nothing waits
    for it, else those its request names, `_Session.start`.) `marks` gets a (step, perf_counter)."""
    from .guards import guarded

    marks = [] if marks is None else marks
    with torch.no_grad():
        guarded(lambda x: x.clone())(torch.ones(4, device=device))
        marks.append(("harness", time.perf_counter()))


def _steps(marks: list[tuple[str, float]]) -> dict[str, float]:
    """Seconds each step took, from (name, perf_counter) marks in order."""
    return {name: round(t - prev, 4) for (name, t), (_, prev) in zip(marks[1:], marks)}


class _Stop(Exception):
    pass


def _receive(sock: socket.socket) -> tuple[dict[str, Any], list[int]]:
    data, fds, _, _ = socket.recv_fds(sock, MAX_MESSAGE, 4)
    if not data:
        raise ValueError("closed")
    return json.loads(data), list(fds)


class _Session:
    def __init__(self, sock: socket.socket, backend: Any, request: dict[str, Any], early: dict | None,
                 capabilities: dict | None = None) -> None:
        self.sock, self.backend, self.req, self.early = sock, backend, request, early
        self.capabilities = capabilities or {}
        self.stage = "load"
        self.warmed: set[str] = set()  # libraries started while it was a spare

    def send(self, msg: dict[str, Any]) -> None:
        try:
            self.sock.send(json.dumps(msg).encode()[:MAX_MESSAGE])
        except OSError:
            raise _Stop() from None

    def _first_call(self) -> None:
        """The candidate's first call, made while loading on a GPU (`warm_call`), on trial 0's
        inputs: what it raises is what verification's first call, on the same inputs, would have
        raised, and is said as such (stage "verify"). Left for verification to find again, a
        kernel that broke the device reported the next launch's error, not its own (an illegal
        address read as "operation not supported on global/shared address space")."""
        import torch

        from .guards import GuardViolation, guarded

        model = guarded(self.model) if self.req.get("warm_guard") else self.model  # as verification's first call
        try:
            with torch.no_grad():
                model(*self.slots[0])
            self.backend.synchronize()
        except _Stop:
            raise
        except GuardViolation as exc:
            self.fail("guard", str(exc))
        except Exception as exc:  # noqa: BLE001 - the candidate's code: any failure is its verdict
            self.fail("verify", describe_exception(exc))

    def fail(self, stage: str, message: str, step: str | None = None) -> None:
        self.send({"type": "error", "stage": stage, "message": message, **({"step": step} if step else {})})
        raise _Stop()

    def start(self, fds: list[int]) -> None:
        import torch

        from ..backends.sharing import view_bytes
        from ..languages import language_for_artifact

        marks = [("begin", time.perf_counter())]
        if self.backend.gpu:  # the libraries its task may use, not started yet (a spare taken while starting)
            from .judge import LIBRARIES, warm_up_libraries

            wanted = self.req.get("libraries", LIBRARIES)
            wanted = ([lib for lib in LIBRARIES if lib in wanted and lib not in self.warmed]
                      if isinstance(wanted, (list, tuple)) else [])
            if wanted:
                warm_up_libraries(torch, self.backend.torch_device, marks, wanted)
        raw = self.backend.open_arena(self.req["arena"], fds)  # before the syscall filter: the driver needs it
        marks.append(("arena", time.perf_counter()))
        # the loader comes from the artifact the evaluator built, never from the workspace's say-so
        lang = None if self.req.get("reference_source") else language_for_artifact(self.req.get("library"))
        report = _enter_sandbox(self.req, self.backend, lang)
        marks.append(("sandbox", time.perf_counter()))
        if self.early is not None:
            report["landlock_before_threads"] = self.early.get("landlock")
        report.update(self.capabilities)
        report["libraries_while_spare"] = sorted(self.warmed)  # (for diagnosis: the rest started in `start`)
        device = torch.device(self.backend.torch_device)

        def value(spec: dict[str, Any]) -> Any:
            return view_bytes(raw, spec["layout"], int(spec["offset"])) if "layout" in spec else spec.get("value")

        self.slots = [[value(a) for a in slot] for slot in self.req["slots"]]
        weights = {name: value(spec) for name, spec in self.req["weights"].items()}
        init_args = [value(a) for a in self.req["init_args"]]
        step = "import"  # then "construct": KernelBench counts only an import failure as not compiled
        try:
            if self.req.get("reference_source"):  # the judge's baseline client: the task's own Model
                from .judge import module_from_source

                model_cls = module_from_source("reference_task", self.req["reference_source"]).Model
            else:
                from ..languages.snapshot import checked_model_new

                ws = Path(self.req["workspace"])
                lang.install(self.req["extension"], self.req["library"], ws)
                # the checked copy beside the artifact (the workspace's own file only for a language
                # whose artifact has none); the workspace never goes on sys.path
                module = _module_from_file("model_new", checked_model_new(self.req["library"]) or ws / "model_new.py")
                model_cls = getattr(module, "ModelNew", None)
                if model_cls is None:
                    self.fail("load", "model_new.py defines no class ModelNew", step)
            marks.append(("import", time.perf_counter()))
            step = "construct"
            from .judge import construct

            model, _ = construct(torch, model_cls, init_args, int(self.req["seed"]), self.req["made_on"])
            marks.append(("construct", time.perf_counter()))
            dtype = self.req.get("dtype")
            if dtype:
                model = model.to(getattr(torch, dtype))
            # on a GPU the baseline client (the task's own Model: trusted, laid out as the judge's
            # reference) takes the arena's weights as they are, no second copy of them (issue 23: a
            # 256 MiB copy per client put level2/12_Gemm_Multiply_LeakyReLU at 3.01x the naive
            # harness's memory). Not on a CPU: there the arena is a shared file mapping, slower to read
            # than the candidate's private copy, and eager lost to the reference as its own solution.
            # A candidate's ModelNew is copied into, always: it may lay its parameters out otherwise, and what
            # it kept of them in __init__ (a view, a list, a descriptor, a tie) must see the task's weights (a
            # review of issue 23's twelfth session: taken as they are, such honest candidates computed with
            # the weights of their own construction)
            model.load_state_dict(weights, strict=True,
                                  assign=bool(self.req.get("reference_source")) and self.backend.gpu)
            self.model = model.to(device).eval()
            self.models = {"candidate": self.model, "eager": self.model}
            if self.req.get("compile_mode"):
                self.models["compile"] = torch.compile(self.model, mode=self.req["compile_mode"])
            marks.append(("weights", time.perf_counter()))
            # JIT languages compile now, while processes may start; the baseline client (trusted) makes its
            # first call now, beside the candidate's load, and on a GPU the candidate too (`warm_call`).
            # A candidate's first call is guarded as verification's, whatever asks for it: its slot 0
            # holds trial 0's inputs (red team round 8: a Triton candidate's JIT warm-up ran unguarded)
            if self.req.get("warm_call") == "candidate" or (lang is not None and lang.warm_up):  # lang: candidates'
                self._first_call()
            elif self.req.get("warm_call") == "baseline":
                with torch.no_grad():
                    self.model(*self.slots[0])
                self.backend.synchronize()
            if self.req.get("syscalls") and report.get("processes_while_loading"):  # the judge checks for it
                from ..isolation import sandbox

                report["seccomp_after_load"] = sandbox.deny_syscalls().get("seccomp")
        except _Stop:
            raise
        except BaseException as exc:
            self.fail("load", describe_exception(exc), step)
        marks.append(("first_call", time.perf_counter()))
        # where loading spent its time, as this process saw it (a claim: for diagnosis only)
        report["load_steps_s"] = _steps(marks)
        self.send({"type": "ready", "sandbox": report})

    def serve(self) -> None:
        """Run what the judge asks. A run first lets go of the outputs of the earlier batches the
        judge names (it has read them by now; it may keep some held a while longer, and the
        baseline client keeps eager's while compile runs, so the judge can compare against them
        in place), inside the interval for every model alike."""
        import torch

        from .guards import GuardViolation, guarded
        from .judge import outputs_on

        guarded_model = guarded(self.model)
        device = torch.device(self.backend.torch_device)
        kept: dict[Any, list[Any]] = {}
        while True:
            try:
                msg, _ = _receive(self.sock)
            except (OSError, ValueError):
                raise _Stop() from None
            if msg.get("type") != "run":
                raise _Stop()
            self.stage = str(msg.get("stage", "verify"))
            name = str(msg.get("model", "candidate"))
            release = msg.get("release")
            for batch in release if isinstance(release, list) else [name]:
                kept.pop(batch, None)
            fn = guarded_model if msg.get("guard") else self.models.get(name, self.model)
            outs = []
            try:
                with torch.no_grad():
                    for s in msg["slots"]:
                        outs.append(fn(*self.slots[s]))
                    if self.backend.gpu:  # host outputs onto the device, for every model alike
                        outs = outputs_on(device, outs)
                    self.backend.synchronize()
                described = [describe_output(self.backend, o) for o in outs]
            except GuardViolation as exc:
                self.fail("guard", str(exc))
            except BaseException as exc:
                self.fail(self.stage, describe_exception(exc))
            kept[msg.get("batch", name)] = outs
            del outs
            self.send({"type": "done", "outputs": described})


def describe_output(backend: Any, obj: Any) -> Any:
    """The output's structure with each tensor replaced by where it lives (the baseline client
    runs this very harness, so the baselines pay the same cost inside their intervals)."""
    import torch

    from ..backends.sharing import describe_tensor

    if isinstance(obj, torch.Tensor):
        # an empty tensor has no memory to locate (its address is 0; CUDA cannot export it)
        return {"tensor": describe_tensor(obj), "where": backend.locate(obj) if obj.numel() else {},
                "device": obj.device.type}
    if isinstance(obj, tuple):
        return {"tuple": [describe_output(backend, o) for o in obj]}
    if isinstance(obj, list):
        return {"list": [describe_output(backend, o) for o in obj]}
    if isinstance(obj, dict):
        return {"dict": [[str(k), describe_output(backend, v)] for k, v in obj.items()]}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return {"value": obj}
    return {"value": f"{type(obj).__name__}: {str(obj)[:200]}"}


def _module_from_file(name: str, path: Path) -> types.ModuleType:
    """Compile the source bytes themselves: never a `__pycache__` .pyc beside them (a stale-
    marked or unchecked-hash one would run code nobody checked)."""
    try:
        source = path.read_bytes()
    except OSError as exc:
        raise ImportError(f"cannot import {path.name}: {exc.strerror}") from None
    module = types.ModuleType(name)
    module.__file__ = str(path)
    code = compile(source, str(path), "exec", dont_inherit=True)
    sys.modules[name] = module
    exec(code, module.__dict__)
    return module


def trusted_sys_path() -> None:
    """`python -m` puts the working directory (the candidate's writable scratch) first on
    sys.path: a `sympy.py` written there would replace what torch imports later. Drop it."""
    cwd = os.getcwd()
    sys.path[:] = [p for p in sys.path if p not in ("", ".", cwd)]


def _confine_writes_early() -> dict[str, Any]:
    """Writes confined before any thread exists (`sandbox.confine_writes_early`), with the
    places any language writes outside scratch (the language is not known yet)."""
    from ..isolation.sandbox import confine_writes_early
    from ..languages.base import shared_writable_paths

    return confine_writes_early(Path(os.environ["HOME"]), shared_writable_paths())


def _enter_sandbox(request: dict[str, Any], backend: Any, lang: Any = None) -> dict[str, Any]:
    """The judge's request and the language's needs, applied by `apply_candidate_sandbox`:
    after the device started, before any candidate code exists."""
    from ..isolation.sandbox import apply_candidate_sandbox

    scratch = Path(os.environ.get("HOME", "/nonexistent"))
    needs = lang.sandbox_needs(scratch) if lang is not None else None
    if needs:
        os.environ.update(needs.environment)
    return apply_candidate_sandbox(
        scratch, backend.gpu, limits=request.get("limits", {}), address_space_limit=request.get("address_space_limit"),
        filesystem=bool(request.get("filesystem")), syscalls=bool(request.get("syscalls")),
        writable=needs.writable if needs else (), spawn=bool(needs and needs.processes_while_loading),
        executable=needs.executable if needs else (),
        readable=_own_files(request) if request.get("confine_reads") else None)


def _own_files(request: dict[str, Any]) -> list[Path] | None:
    """What of the candidate's own the candidate process reads: its artifact's folder (the
    snapshot: library and checked model_new.py) and, where the language's artifact has no
    checked copy, the workspace's model_new.py alone. None for the judge's baseline client
    (trusted code, and torch.compile there runs the C++ compiler): its reads stay open."""
    if request.get("reference_source") or not request.get("library"):
        return None
    from ..languages.snapshot import checked_model_new

    library = Path(request["library"])
    own = [library.parent]
    if checked_model_new(library) is None and request.get("workspace"):
        own.append(Path(request["workspace"]) / "model_new.py")
    return own


def describe_exception(exc: BaseException) -> str:
    """Exception type, message and the last frames, short enough for a model to read."""
    tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
    text = "".join(tb[-3:]) if len(tb) > 3 else "".join(tb)
    return text[-3000:].strip()


if __name__ == "__main__":
    main()
