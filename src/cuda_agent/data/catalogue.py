"""The operator catalogue: every public torch (and transformers) operator, with what probing
found out about it. `crawl()` lists the candidates, `build_catalogue()` probes each in an
isolated worker (`probe.py`) and caches the result per library version.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from .ops import ArgChoice, Kind
from ..isolation.paths import default_cache_dir
from ..storage import atomic_write

Library = Literal["torch", "transformers"]
CATALOGUE_VERSION = 1


class Verdict:
    """Why an operator (at one rank) is or is not usable."""

    OK = "ok"
    STOCHASTIC = "stochastic"
    NONDETERMINISTIC = "nondeterministic"
    MUTATES_INPUT = "mutates its input"
    DATA_DEPENDENT_SHAPE = "output shape depends on input values"
    INPUT_INSENSITIVE = "output does not depend on the input"
    CONSTANT = "constant output"
    IDENTITY = "identity (returns its input)"
    UNUSED_PARAMETER = "a parameter does not affect the output"
    # verdicts that hold for the operator as a whole, whatever rank found them
    DISQUALIFYING = (STOCHASTIC, NONDETERMINISTIC, MUTATES_INPUT)


class RankVariant(BaseModel):
    """How the operator is called on an input of one rank, and what it returns."""

    rank: int
    args: list[ArgChoice] = Field(default_factory=list)
    out_rank: int
    out_dtype: str = "float32"
    out_index: int | None = Field(default=None, description="tuple output: the element kept")
    positive_input: bool = Field(default=False, description="needs inputs in (0, 1) for a finite output")
    nonneg_output: bool = False
    preserves_shape: bool = False
    elementwise: bool = False
    numel_ratio: float = 1.0

    @property
    def float_output(self) -> bool:
        return self.out_dtype.startswith(("float", "bfloat"))


class OpSpec(BaseModel):
    """One operator and everything probing learnt about it."""

    name: str
    kind: Kind
    library: Library = "torch"
    usable: bool = False
    reason: str = Field(default="", description="why it is not usable")
    stochastic: bool = False
    has_parameters: bool = False
    category: str = ""
    variants: list[RankVariant] = Field(default_factory=list)
    rank_verdicts: dict[int, str] = Field(default_factory=dict)
    probe_ms: float = 0.0

    def rejected(self, reason: str) -> "OpSpec":
        self.usable, self.reason = False, reason
        return self

    def finish(self, verdicts: list[str], has_parameters: bool) -> "OpSpec":
        """Fold per-rank verdicts into usability: an op-wide fault anywhere disqualifies it."""
        ranks = [v.rank for v in self.variants]
        self.rank_verdicts = {r: v for r, v in zip(range(1, len(verdicts) + 1), verdicts)}
        self.stochastic = Verdict.STOCHASTIC in verdicts
        self.has_parameters = has_parameters
        fatal = next((v for v in verdicts if v in Verdict.DISQUALIFYING), None)
        good = [v for v in self.variants if self.rank_verdicts.get(v.rank) == Verdict.OK]
        if fatal:
            self.usable, self.reason = False, fatal
        elif not good:
            found = [v for v in verdicts if v != Verdict.OK]
            useful = [v for v in found if not v.startswith(("fails", "no hint"))] or found
            self.usable, self.reason = False, useful[0] if useful else "no rank works"
        else:
            self.usable, self.reason = True, ""
        self.variants = good if self.usable else [v for v in self.variants if v.rank in ranks]
        self.category = self._category(good)
        return self

    def _category(self, good: list[RankVariant]) -> str:
        if not good:
            return ""
        if self.has_parameters:
            return "parametric"
        v = good[0]
        if v.elementwise:
            return "elementwise"
        if v.numel_ratio < 1:
            return "reduction"
        if v.numel_ratio > 1:
            return "expanding"
        return "reshape" if not v.preserves_shape else "mixing"

    def variant(self, rank: int) -> RankVariant | None:
        return next((v for v in self.variants if v.rank == rank), None)

    @property
    def ranks(self) -> list[int]:
        return [v.rank for v in self.variants]


class Catalogue(BaseModel):
    """All probed operators of one environment (library versions are part of its identity)."""

    version: int = CATALOGUE_VERSION
    key: str = ""
    torch_version: str = ""
    transformers_version: str | None = None
    created: float = 0.0
    seconds: float = 0.0
    ops: list[OpSpec] = Field(default_factory=list)

    def usable(self, library: str | None = None) -> list[OpSpec]:
        return [o for o in self.ops if o.usable and (library is None or o.library == library)]

    def get(self, name: str) -> OpSpec:
        for op in self.ops:
            if op.name == name:
                return op
        raise KeyError(f"no operator {name!r} in the catalogue")

    def summary(self) -> dict[str, Any]:
        usable = self.usable()
        return {
            "probed": len(self.ops),
            "usable": len(usable),
            "by_library": dict(Counter(o.library for o in usable)),
            "by_kind": dict(Counter(o.kind for o in usable)),
            "by_category": dict(Counter(o.category for o in usable)),
            "stochastic": sorted(o.name for o in self.ops if o.stochastic),
            "rejected_by_reason": dict(Counter(_reason_class(o.reason) for o in self.ops if not o.usable)),
        }

    def save(self, path: str | Path) -> None:
        atomic_write(path, self.model_dump_json(indent=1))

    @classmethod
    def load(cls, path: str | Path) -> "Catalogue":
        return cls.model_validate_json(Path(path).read_text())


def _reason_class(reason: str) -> str:
    return reason.split(":")[0].split("'")[0].strip() or "unknown"


# ---- crawling -------------------------------------------------------------------------------
class OpRef(BaseModel):
    name: str
    kind: Kind
    library: Library = "torch"


def crawl(include_transformers: bool | None = None, transformers_norm_limit: int = 24) -> list[OpRef]:
    """Candidate operators from the installed libraries, in a stable order, each object once;
    transformers' when `include_transformers`, or when it is importable if None."""
    import torch
    import torch.nn.functional as F
    from torch.nn.modules.lazy import LazyModuleMixin
    from torch.overrides import get_testing_overrides

    overridable = set(get_testing_overrides())
    refs: list[OpRef] = []
    seen: set[int] = set()

    def add(name: str, obj: Any, kind: Kind, library: Library = "torch") -> None:
        if id(obj) in seen:
            return
        seen.add(id(obj))
        refs.append(OpRef(name=name, kind=kind, library=library))

    for attr in sorted(dir(torch.nn)):
        obj = getattr(torch.nn, attr)
        if (_public(attr) and isinstance(obj, type) and issubclass(obj, torch.nn.Module)
                and obj.__module__.startswith("torch.nn.modules") and not issubclass(obj, LazyModuleMixin)):
            add(f"torch.nn.{attr}", obj, "module")
    for attr in sorted(dir(F)):
        obj = getattr(F, attr)
        if _public(attr) and callable(obj) and not isinstance(obj, type) and (
                obj in overridable or getattr(obj, "__module__", "") == "torch.nn.functional"):
            add(f"torch.nn.functional.{attr}", obj, "function")
    for ns_name, ns in (("torch", torch), ("torch.special", torch.special), ("torch.linalg", torch.linalg),
                        ("torch.fft", torch.fft)):
        for attr in sorted(dir(ns)):
            obj = getattr(ns, attr, None)
            if _public(attr) and callable(obj) and not isinstance(obj, type) and _in(obj, overridable):
                add(f"{ns_name}.{attr}", obj, "function")
    for attr in sorted(dir(torch.Tensor)):
        obj = getattr(torch.Tensor, attr, None)
        if _public(attr) and not hasattr(torch, attr) and _in(obj, overridable) and callable(obj):
            add(f"torch.Tensor.{attr}", obj, "method")
    if include_transformers is not False:
        refs += _transformers_refs(include_transformers is True, transformers_norm_limit)
    return refs


def _public(attr: str) -> bool:
    return not attr.startswith("_") and not attr.endswith("_")


def _in(obj: Any, pool: set[Any]) -> bool:
    try:
        return obj in pool
    except TypeError:
        return False


_NORM_CLASS = re.compile(r"^class (\w+(?:RMSNorm|LayerNorm))\(nn\.Module\):", re.M)


def _transformers_refs(required: bool, norm_limit: int) -> list[OpRef]:
    """transformers' activation classes, and norm layers defined in its model files: found by
    reading the sources (importing hundreds of model modules takes minutes), identical bodies once."""
    try:
        import transformers
        import transformers.activations as acts
    except ImportError:
        if required:
            raise
        return []
    import torch

    refs = []
    for attr in sorted(dir(acts)):
        obj = getattr(acts, attr)
        if isinstance(obj, type) and issubclass(obj, torch.nn.Module) and obj.__module__ == acts.__name__:
            refs.append(OpRef(name=f"transformers.activations.{attr}", kind="module", library="transformers"))
    models = Path(transformers.__file__).parent / "models"
    bodies: set[str] = set()
    for path in sorted(models.glob("*/modeling_*.py")):
        if len(bodies) >= norm_limit:
            break
        try:
            text = path.read_text(encoding="utf-8")
        except OSError:
            continue
        for match in _NORM_CLASS.finditer(text):
            body = _class_body(text, match.start())
            digest = hashlib.sha256(re.sub(r"\w*(RMSNorm|LayerNorm)\w*", "N", body).encode()).hexdigest()
            if digest in bodies:
                continue
            bodies.add(digest)
            module = f"transformers.models.{path.parent.name}.{path.stem}"
            refs.append(OpRef(name=f"{module}.{match.group(1)}", kind="module", library="transformers"))
            if len(bodies) >= norm_limit:
                break
    return refs


def _class_body(text: str, start: int) -> str:
    nxt = re.compile(r"^\S", re.M).search(text, text.index("\n", start) + 1)
    return text[start:nxt.start() if nxt else len(text)]


# ---- building (probing in an isolated worker) ----------------------------------------------------
def catalogue_key(include_transformers: bool | None) -> str:
    """Identity of a catalogue: library versions and the probing code itself."""
    import torch

    here = Path(__file__).parent
    code = b"".join((here / f).read_bytes() for f in ("hints.py", "ops.py", "probe.py", "catalogue.py"))
    tf = _transformers_version() if include_transformers is not False else None
    raw = json.dumps([CATALOGUE_VERSION, torch.__version__, tf, hashlib.sha256(code).hexdigest()])
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


def _transformers_version() -> str | None:
    try:
        from importlib.metadata import version

        return version("transformers")
    except Exception:  # noqa: BLE001 - not installed
        return None


def build_catalogue(*, include_transformers: bool | None = None, cache_dir: str | Path | None = None,
                    refresh: bool = False, op_timeout_s: float = 10.0, workers: int | None = None,
                    progress: Callable[[int, int, OpSpec], None] | None = None,
                    only: Iterable[str] | None = None) -> Catalogue:
    """Crawl and probe every operator (cached per versions; `refresh` re-probes) in `workers`
    isolated processes (default: one per core, at most 4); an operator that kills its worker is
    rejected with that reason. `only` probes just the named operators, and is not cached."""
    import torch

    key = catalogue_key(include_transformers)
    path = Path(cache_dir or default_cache_dir()) / "data" / f"catalogue-{key}.json"
    if only is None and not refresh and path.is_file():
        try:
            return Catalogue.load(path)
        except ValueError:
            pass  # unreadable cache: probe again
    refs = crawl(include_transformers)
    if only is not None:
        wanted = set(only)
        refs = [r for r in refs if r.name in wanted]
    t0 = time.time()
    specs = _probe_all(refs, workers or min(4, os.cpu_count() or 1), op_timeout_s, progress)
    cat = Catalogue(key=key, torch_version=torch.__version__,
                    transformers_version=_transformers_version() if include_transformers is not False else None,
                    created=time.time(), seconds=time.time() - t0, ops=specs)
    if only is None:
        cat.save(path)
    return cat


def _probe_all(refs: list[OpRef], workers: int, op_timeout_s: float,
               progress: Callable[[int, int, OpSpec], None] | None) -> list[OpSpec]:
    """Probe `refs` on a few worker processes; results in the order of `refs`."""
    from ..backends import HOST_BACKEND
    from .data_worker import DataWorker, WorkerDied, WorkerError, run_jobs

    results: dict[int, OpSpec] = {}
    lock = threading.Lock()

    def probe(_: int, worker: DataWorker, job: tuple[int, OpRef]) -> None:
        i, ref = job
        blank = OpSpec(name=ref.name, kind=ref.kind, library=ref.library)
        try:
            reply = worker.request({"op": "probe", "ref": ref.model_dump()}, timeout_s=op_timeout_s)
            spec = OpSpec.model_validate(reply["spec"])
        except WorkerDied as exc:
            spec = blank.rejected(f"worker died: {exc.reason}")
        except WorkerError as exc:
            spec = blank.rejected(f"probe failed: {exc.message.splitlines()[-1][:200]}")
        with lock:
            results[i] = spec
            if progress:
                progress(len(results), len(refs), spec)

    run_jobs(enumerate(refs), min(workers, len(refs)), lambda _: DataWorker(HOST_BACKEND, threads=1), probe)
    return [results[i] for i in range(len(refs))]
