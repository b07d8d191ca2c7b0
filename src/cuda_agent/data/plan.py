"""Plans: which operators a task composes, in which order, on an input of which rank.

Candidate `i` of a run with seed `s` is sampled from its own generator seeded by "s:i", so a
plan never depends on other candidates, worker count or scheduling: a resumed run replays it.
"""

from __future__ import annotations

import random

from pydantic import BaseModel, Field

from .catalogue import Catalogue, OpSpec
from .config import ComposeConfig
from .hints import SIZE_MENU
from .ops import ArgChoice, Kind

PLAN_ATTEMPTS = 200


class PlanStep(BaseModel):
    op: str
    kind: Kind
    library: str = "torch"
    rank: int = Field(description="rank of the tensor this step receives")
    args: list[ArgChoice] = Field(default_factory=list)
    out_index: int | None = None


class Plan(BaseModel):
    index: int
    seed: int
    rank: int
    feature_dims: list[int] = Field(description="input sizes after the batch axis (rank 1: the one size)")
    positive_input: bool = False
    target_ms: float = Field(default=10.0, description="eager runtime the size search aims for")
    steps: list[PlanStep]

    @property
    def ops(self) -> list[str]:
        return [s.op for s in self.steps]

    @property
    def data_source(self) -> str:
        """Ops-6K's `data_source`: library#number-of-operators."""
        library = "transformers" if any(s.library == "transformers" for s in self.steps) else "torch"
        return f"{library}#{len(self.steps)}"

    def rng(self, step: int) -> random.Random:
        return random.Random(f"{self.seed}:{self.index}:{step}")


class PlanError(RuntimeError):
    """No plan satisfies the constraints (e.g. too few usable operators)."""


class Planner:
    """Samples plans from a catalogue under a ComposeConfig."""

    def __init__(self, catalogue: Catalogue, config: ComposeConfig, window_ms: tuple[float, float]):
        self.config = config
        self.window_ms = window_ms
        include_tf = config.include_transformers
        self.ops = [o for o in catalogue.usable() if include_tf is not False or o.library != "transformers"]
        if not self.ops:
            raise PlanError("the catalogue has no usable operators")
        self._by_name = {o.name: o for o in self.ops}
        self._by_rank: dict[int, list[OpSpec]] = {
            r: [o for o in self.ops if o.variant(r) is not None] for r in range(1, 6)}

    def plan(self, seed: int, index: int) -> Plan:
        rng = random.Random(f"{seed}:{index}")
        sizes = list(self.config.mix)
        k = rng.choices(sizes, weights=[self.config.mix[s] for s in sizes])[0]
        for _ in range(PLAN_ATTEMPTS):
            steps = self._walk(rng, k)
            if steps:
                first = self._by_name[steps[0].op].variant(steps[0].rank)
                assert first is not None
                rank = steps[0].rank
                lo, hi = self.window_ms
                target = _log_uniform(rng, max(lo * 2, lo + 1e-3), max(hi / 2, lo * 2))
                return Plan(index=index, seed=seed, rank=rank, feature_dims=list(rng.choice(SIZE_MENU[rank])),
                            positive_input=first.positive_input, target_ms=target, steps=steps)
        raise PlanError(f"no {k}-operator plan found in {PLAN_ATTEMPTS} attempts")

    def _walk(self, rng: random.Random, k: int) -> list[PlanStep] | None:
        ranks = [r for r in self.config.rank_weights if self._by_rank.get(r)]
        rank = rng.choices(ranks, weights=[self.config.rank_weights[r] for r in ranks])[0]
        # Library mix per task, as Ops-6K reports it: a few tasks use exactly one transformers layer.
        tf_step = rng.randrange(k) if rng.random() < self.config.transformers_share else -1
        steps: list[PlanStep] = []
        for j in range(k):
            last = j == k - 1
            pool = []
            for op in self._by_rank.get(rank, []):
                if (op.library == "transformers") != (j == tf_step):
                    continue
                v = op.variant(rank)
                assert v is not None
                if not last and (not v.float_output or v.out_rank < 1):
                    continue  # only the last operator may return a scalar or a non-float
                if j > 0 and (v.positive_input or _same_op(op.name, steps[-1].op)):
                    continue  # domain-restricted ops only see the task's own (positive) input; no
                    # operator twice in a row under any spelling (nn.Softmax then torch.special.softmax)
                pool.append(op)
            if not pool:
                return None
            op = self._pick(rng, pool, self.config.first_category_weights if j == 0
                            else self.config.later_category_weights)
            v = op.variant(rank)
            assert v is not None
            steps.append(PlanStep(op=op.name, kind=op.kind, library=op.library, rank=rank, args=v.args,
                                  out_index=v.out_index))
            rank = v.out_rank
        return steps

    def _pick(self, rng: random.Random, pool: list[OpSpec], weights: dict[str, float]) -> OpSpec:
        """A category by its weight, then an operator within it: categories are few and sized
        very differently, so weighting them directly keeps parametric layers common although
        there are far fewer of them than elementwise ops."""
        categories = sorted({o.category for o in pool})
        cat = rng.choices(categories, weights=[weights.get(c, 0.5) for c in categories])[0]
        return rng.choice([o for o in pool if o.category == cat])


def _same_op(a: str, b: str) -> bool:
    from .canonical import canonical_name

    return a == b or (canonical_name(a) or a) == (canonical_name(b) or b)


def _log_uniform(rng: random.Random, lo: float, hi: float) -> float:
    import math

    return math.exp(rng.uniform(math.log(lo), math.log(hi)))
