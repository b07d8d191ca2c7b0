"""The similarity screen shared by synthesis, the audit, the set report and `data similarity`:
evaluation tasks to stay away from, and the tasks kept so far. `EvalSet.screen` is the one
contamination verdict (AST near-copy first, then the canonical-form rules); every caller reads
its `EvalVerdict`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .canonical import DEFAULT_VERDICTS, ContaminationIndex, Nearest, OpForm, OpSequences, op_form
from .similarity import Fingerprint, SimilarityError, SimilarityIndex, fingerprint, similarity

AST_SIMILARITY = "ast_similarity"  # the rule name of an AST near-copy (score >= the threshold)


@dataclass(frozen=True)
class EvalTask:
    """One evaluation task as a verdict names it: its name, where it was loaded from, and the
    AST similarity of the screened task to it."""

    name: str
    path: str
    ast: float

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "path": self.path, "ast": round(self.ast, 4)}


@dataclass(frozen=True)
class EvalVerdict:
    """The contamination verdict of one task against an evaluation set.

    `rules` lists every rule that matched, in the screen's order (`ast_similarity`, then the
    canonical verdict: `same_ops`, `same_primitives` or `eval_composition`); `rule` is the first,
    the one synthesis rejects with. `matched` are the evaluation tasks the first rule names
    (several for `eval_composition`); for a clean task, the nearest by AST. `nearest` is the
    nearest by canonical form (None when the evaluation set has no canonical forms)."""

    rules: tuple[str, ...]
    matched: tuple[EvalTask, ...]
    ast_nearest: EvalTask | None
    nearest: Nearest | None
    ast_detail: str = ""
    canonical_ops: tuple[str, ...] = field(default=())

    @property
    def flagged(self) -> bool:
        return bool(self.rules)

    @property
    def rule(self) -> str:
        return self.rules[0] if self.rules else ""

    @property
    def detail(self) -> str:
        """Why the first rule matched, as synthesis and the audit record it."""
        if not self.rules:
            return ""
        if self.rule == AST_SIMILARITY:
            return self.ast_detail
        assert self.nearest is not None
        return f"{self.nearest.verdict}: {self.nearest.detail}"

    def meta(self) -> dict[str, Any]:
        """The per-row columns synthesis and the set report store (`similarity_eval`, `nearest_eval` ...)."""
        out: dict[str, Any] = {}
        if self.ast_nearest is not None:
            out.update(similarity_eval=round(self.ast_nearest.ast, 4), similar_eval_task=self.ast_nearest.name)
        if self.nearest is not None:
            out.update(self.nearest.as_dict())
        return out

    def as_dict(self) -> dict[str, Any]:
        """The verdict as `data similarity --json` prints it."""
        return {"flagged": self.flagged, "rule": self.rule, "rules": list(self.rules),
                "matched": [m.as_dict() for m in self.matched], "detail": self.detail,
                "ast_nearest": self.ast_nearest.as_dict() if self.ast_nearest else None,
                "semantic_nearest": None if self.nearest is None else
                {"name": self.nearest.name, "score": round(self.nearest.score, 4),
                 "order": round(self.nearest.order, 4)},
                "canonical_ops": list(self.canonical_ops)}


class EvalSet:
    """Tasks to stay away from (contamination screen): AST fingerprints and canonical operator
    forms, both taken once from the sources given (e.g. a KernelBench checkout's path)."""

    def __init__(self, sources: list[str], verdicts: list[str] | None = None):
        from ..tasks import load_tasks

        self.names: list[str] = []
        self.paths: dict[str, str] = {}
        self.fingerprints: list[Fingerprint] = []
        self._position: dict[str, int] = {}
        self.index = SimilarityIndex()
        self.canonical = ContaminationIndex(DEFAULT_VERDICTS if verdicts is None else verdicts)
        for source in sources:
            for task in load_tasks(source, on_error="skip"):
                self.add(task.name, task.source, task.origin)

    def add(self, name: str, source: str, path: str = "") -> bool:
        """Add one evaluation task; False (and nothing added) when its source does not parse."""
        try:
            fp = fingerprint(source)
            form = op_form(source)
        except (SimilarityError, SyntaxError):
            return False
        self.index.add(fp)
        self._position.setdefault(name, len(self.names))
        self.names.append(name)
        self.paths.setdefault(name, path)
        self.fingerprints.append(fp)
        self.canonical.add(name, form)
        return True

    def __len__(self) -> int:
        return len(self.names)

    def screen(self, fp: Fingerprint, form: OpForm | None, threshold: float) -> EvalVerdict:
        """The verdict on one task: an AST near-copy (score >= `threshold`) of an evaluation
        task, then the canonical-form rules this set was built with."""
        rules: list[str] = []
        ast_nearest, ast_detail = None, ""
        if len(self.index):
            m = self.index.best(fp)
            ast_nearest = self._task(self.names[m.index], fp, m.score)
            if m.score >= threshold:
                rules.append(AST_SIMILARITY)
                ast_detail = f"similarity {m.score:.3f} to {ast_nearest.name}"
        nearest = self.canonical.check(form) if form is not None and len(self.canonical) else None
        if nearest is not None and nearest.verdict:
            rules.append(nearest.verdict)
        if rules and rules[0] != AST_SIMILARITY:
            assert nearest is not None
            matched = tuple(self._task(n, fp) for n in nearest.matched)
        else:
            matched = (ast_nearest,) if ast_nearest is not None else ()
        return EvalVerdict(tuple(rules), matched, ast_nearest, nearest, ast_detail,
                           tuple(form.ops) if form is not None else ())

    def screen_source(self, source: str, threshold: float) -> EvalVerdict:
        """`screen` from a task's source. Raises SimilarityError when it does not parse."""
        fp = fingerprint(source)
        return self.screen(fp, op_form(source), threshold)

    def _task(self, name: str, fp: Fingerprint, score: float | None = None) -> EvalTask:
        ast = similarity(fp, self.fingerprints[self._position[name]]) if score is None else score
        return EvalTask(name, self.paths.get(name, ""), ast)


class Kept:
    """Tasks kept so far: their fingerprints, and the first holder of each operator sequence."""

    def __init__(self) -> None:
        self.index = SimilarityIndex()
        self.names: list[str] = []
        self.ops = OpSequences()

    def add(self, name: str, fp: str | Fingerprint | None = None, form: OpForm | None = None) -> None:
        if fp is not None:
            self.index.add(fp)
            self.names.append(name)
        self.ops.add(name, form)

    def duplicate(self, fp: str | Fingerprint, threshold: float, meta: dict[str, Any] | None = None) -> str | None:
        """A near-duplicate (AST) of a kept task; the nearest's score goes into `meta`."""
        m = self.index.best(fp)
        if meta is not None:
            meta["similarity_set"] = round(m.score, 4)
        return f"similarity {m.score:.3f} to {self.names[m.index]}" if m.score >= threshold else None

    def same_ops(self, form: OpForm | None) -> str | None:
        first = self.ops.first(form)
        return None if first is None else f"same operators in the same order as {first}"
