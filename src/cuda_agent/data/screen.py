"""The similarity screen shared by synthesis and the audit: evaluation tasks to stay away from,
and the tasks kept so far. Each check returns a readable detail when it hits, else None."""

from __future__ import annotations

from typing import Any

from .canonical import ContaminationIndex, OpForm, OpSequences, op_form
from .similarity import Fingerprint, SimilarityError, SimilarityIndex, fingerprint


class EvalSet:
    """Tasks to stay away from (contamination screen): AST fingerprints and canonical operator
    forms, both taken once from the sources given (e.g. a KernelBench checkout's path)."""

    def __init__(self, sources: list[str], verdicts: list[str] | None = None):
        from ..tasks import load_tasks

        self.names: list[str] = []
        self.index = SimilarityIndex()
        self.canonical = ContaminationIndex(*([verdicts] if verdicts is not None else []))
        for source in sources:
            for task in load_tasks(source, on_error="skip"):
                try:
                    fp = fingerprint(task.source)
                    form = op_form(task.source)
                except (SimilarityError, SyntaxError):
                    continue
                self.index.add(fp)
                self.names.append(task.name)
                self.canonical.add(task.name, form)

    def similar(self, fp: Fingerprint, threshold: float, meta: dict[str, Any]) -> str | None:
        """A near-copy (AST) of an evaluation task; the nearest's score goes into `meta`."""
        if not len(self.index):
            return None
        m = self.index.best(fp)
        meta.update(similarity_eval=round(m.score, 4), similar_eval_task=self.names[m.index])
        return f"similarity {m.score:.3f} to {self.names[m.index]}" if m.score >= threshold else None

    def equivalent(self, form: OpForm | None, meta: dict[str, Any]) -> str | None:
        """The same canonical operators as an evaluation task; the nearest goes into `meta`."""
        if form is None or not len(self.canonical):
            return None
        near = self.canonical.check(form)
        meta.update(near.as_dict())
        return f"{near.verdict}: {near.detail}" if near.verdict else None


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
