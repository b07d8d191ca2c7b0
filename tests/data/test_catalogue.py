"""The operator catalogue crawled from the installed torch, and plans sampled from it.

One full crawl + probe per test session (cached in the session's CUDA_AGENT_CACHE; the other
data tests load it from there). transformers is left out so the result does not depend on
whether it happens to be installed.
"""

from __future__ import annotations

import random

import pytest

from cuda_agent.data.catalogue import Catalogue, OpSpec, build_catalogue, crawl
from cuda_agent.data.compose import ComposeError, realize, render
from cuda_agent.data.config import ComposeConfig
from cuda_agent.data.plan import Plan, Planner, PlanStep
from cuda_agent.tasks import Task


@pytest.fixture(scope="session")
def catalogue(cache_dir) -> Catalogue:
    return build_catalogue(include_transformers=False)


def test_crawl_lists_each_namespace_once() -> None:
    refs = crawl(include_transformers=False)
    names = [r.name for r in refs]
    assert len(names) == len(set(names))
    for expected in ("torch.nn.Conv2d", "torch.nn.functional.gelu", "torch.relu", "torch.special.erf",
                     "torch.linalg.vector_norm", "torch.fft.rfft"):
        assert expected in names
    assert not any(n.endswith("_") or n.rsplit(".", 1)[-1].startswith("_") for n in names)  # no in-place/private
    assert not any("Lazy" in n for n in names)  # lazy modules duplicate their eager twins


def test_catalogue_finds_at_least_150_usable_torch_operators(catalogue: Catalogue) -> None:
    usable = catalogue.usable("torch")
    assert len(usable) >= 150, catalogue.summary()
    kinds = {o.kind for o in usable}
    assert {"module", "function"} <= kinds
    assert catalogue.summary()["by_category"].get("parametric", 0) >= 10


def test_probing_discovers_arguments_and_constraints(catalogue: Catalogue) -> None:
    conv = catalogue.get("torch.nn.Conv2d")
    assert conv.usable and conv.ranks == [4] and conv.category == "parametric"
    filled = {a.name for a in conv.variant(4).args}
    assert {"in_channels", "out_channels", "kernel_size"} <= filled
    linear = catalogue.get("torch.nn.Linear")
    assert linear.usable and 2 in linear.ranks
    relu = catalogue.get("torch.relu")
    assert relu.usable and relu.category == "elementwise" and set(relu.ranks) == {1, 2, 3, 4, 5}
    log = catalogue.get("torch.log")
    assert log.usable and log.variant(2).positive_input  # needs positive inputs to stay finite
    add = catalogue.get("torch.add")
    assert add.usable and any(a.operand == "same" for a in add.variant(2).args)  # a second tensor, probed


def test_stochastic_and_degenerate_operators_are_excluded(catalogue: Catalogue) -> None:
    for name in ("torch.nn.Dropout", "torch.nn.functional.dropout", "torch.nn.RReLU", "torch.bernoulli"):
        op = _maybe(catalogue, name)
        if op is not None and name != "torch.bernoulli":
            assert op.stochastic and not op.usable, (name, op.reason)
    assert not catalogue.get("torch.nn.Identity").usable
    assert not catalogue.get("torch.zeros_like").usable
    assert catalogue.summary()["stochastic"], "no stochastic operator found at all"


def test_probe_of_a_subset_is_not_cached_and_reports_reasons(catalogue: Catalogue) -> None:
    cat = build_catalogue(include_transformers=False, only=["torch.nn.Dropout", "torch.numel", "torch.tanh"])
    by_name = {o.name: o for o in cat.ops}
    assert by_name["torch.tanh"].usable
    assert by_name["torch.nn.Dropout"].reason == "stochastic"
    assert by_name["torch.numel"].reason == "returns no tensor"


def test_plans_are_reproducible_and_follow_the_mix(catalogue: Catalogue) -> None:
    planner = Planner(catalogue, ComposeConfig(), (1.0, 100.0))
    assert planner.plan(3, 17) == planner.plan(3, 17)
    plans = [planner.plan(3, i) for i in range(200)]
    assert len({tuple(p.ops) for p in plans}) > 150
    sizes = [len(p.steps) for p in plans]
    assert 0.7 < sizes.count(2) / len(sizes) < 0.95  # Ops-6K: 83.8% two-operator tasks
    for p in plans:
        assert p.data_source == f"torch#{len(p.steps)}"
        assert all(1 <= s.rank <= 5 for s in p.steps)


def test_composed_tasks_render_load_and_keep_their_shapes(catalogue: Catalogue) -> None:
    planner = Planner(catalogue, ComposeConfig(), (1.0, 100.0))
    rendered, failed = 0, 0
    for i in range(25):
        plan = planner.plan(11, i)
        try:
            real = realize(plan, 2 if plan.rank > 1 else 64)
        except ComposeError:
            failed += 1
            continue
        source = render(real)
        task = Task.from_source(source, name=f"t{i}", ops=plan.ops, data_source=plan.data_source)
        assert "class Model(nn.Module)" in task.source and "def get_init_inputs" in task.source
        namespace: dict = {}
        exec(compile(source, "<task>", "exec"), namespace)  # our own generated code, tiny shapes
        model = namespace["Model"](*namespace["get_init_inputs"]()).eval()
        out = model(*namespace["get_inputs"]())
        out = out[0] if isinstance(out, tuple) else out
        assert tuple(out.shape) == real.shapes[-1]
        rendered += 1
    assert rendered >= 18 and failed <= 7, (rendered, failed)


def test_a_plan_that_cannot_chain_is_a_compose_error() -> None:
    plan = Plan(index=0, seed=0, rank=2, feature_dims=[16], steps=[
        PlanStep(op="torch.nn.Conv2d", kind="module", rank=2, args=[]),  # Conv2d without its arguments
    ])
    with pytest.raises(ComposeError, match="step 1"):
        realize(plan, 2)


def _maybe(cat: Catalogue, name: str) -> OpSpec | None:
    try:
        return cat.get(name)
    except KeyError:
        return None


def test_hint_choices_are_deterministic() -> None:
    from cuda_agent.data.hints import Hint

    width = Hint("width", -1)
    assert width.fill((4, 256), random.Random("a")) == width.fill((4, 256), random.Random("a"))
    assert Hint("divisor", 1).fill((2, 12, 5), random.Random(0)) == 4
    assert Hint("merge_last").fill((2, 3, 4, 5), random.Random(0)) == [-1, 3, 20]
