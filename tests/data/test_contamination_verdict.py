"""The contamination verdict that `cuda-agent data similarity` shows: KernelBench tasks rewritten in
other spellings are flagged with the task they rewrite and the rule that matched, genuinely
different tasks are not, and the CLI's text and JSON carry the same verdict synthesis rejects with.

Fixtures (tests/data/fixtures/): `kernelbench/` a 27-task sample of KernelBench levels 1-2 (copied
unchanged); `rewrites/` 22 rewrites (method calls, modules, functional calls, clamp / where /
maximum for ReLU, the sigmoid formula, einsum and @ for matmul, x @ W.T + b for Linear, Mish by
hand ...) with `expected.json` naming the task each rewrites; `padded/` six tasks with a no-op
step added (times one, plus zero); `chains/` compositions of level-1 tasks; `different/` tasks
no KernelBench task equals.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cuda_agent.data.canonical import EVAL_COMPOSITION, SAME_OPS, SAME_PRIMITIVES, VERDICTS, op_form
from cuda_agent.data.screen import AST_SIMILARITY, EvalSet

FIXTURES = Path(__file__).parent / "fixtures"
KERNELBENCH = FIXTURES / "kernelbench"
THRESHOLD = 0.9


def _files(folder: str) -> list[Path]:
    return sorted((FIXTURES / folder).glob("*.py"))


def _expected(folder: str) -> dict[str, list[str]]:
    raw = json.loads((FIXTURES / folder / "expected.json").read_text())
    return {k: v if isinstance(v, list) else [v] for k, v in raw.items()}


@pytest.fixture(scope="module")
def evals() -> EvalSet:
    return EvalSet([str(KERNELBENCH)])


@pytest.fixture(scope="module")
def evals_without_composition() -> EvalSet:
    return EvalSet([str(KERNELBENCH)], [SAME_OPS, SAME_PRIMITIVES])


def test_fixtures_are_complete(evals: EvalSet) -> None:
    assert len(evals) == 27
    expected = _expected("rewrites")
    assert sorted(expected) == [p.stem for p in _files("rewrites")] and len(expected) >= 20
    for names in expected.values():
        assert all(n in evals.names for n in names), names


@pytest.mark.parametrize("path", _files("rewrites"), ids=lambda p: p.stem)
def test_a_rewrite_is_flagged_with_the_task_it_rewrites(evals: EvalSet, path: Path) -> None:
    verdict = evals.screen_source(path.read_text(), THRESHOLD)
    assert verdict.flagged, (path.stem, verdict)
    assert verdict.rule in (AST_SIMILARITY, SAME_OPS, SAME_PRIMITIVES), verdict.rule
    assert [m.name for m in verdict.matched][:1] in [[n] for n in _expected("rewrites")[path.stem]], verdict.matched
    matched = verdict.matched[0]
    assert matched.path.endswith(matched.name.split("/")[-1] + ".py") and 0.0 < matched.ast <= 1.0
    assert verdict.detail and matched.name in verdict.detail


def test_ast_similarity_alone_misses_most_rewrites(evals: EvalSet) -> None:
    """The reason for the semantic rules: most rewrites sit at AST 0.25-0.89."""
    scores = {p.stem: evals.screen_source(p.read_text(), THRESHOLD).matched[0].ast for p in _files("rewrites")}
    below = [s for s in scores.values() if s < THRESHOLD]
    assert len(below) >= 18, scores
    assert min(below) < 0.5


@pytest.mark.parametrize("path", _files("different"), ids=lambda p: p.stem)
def test_a_different_task_is_not_flagged(evals: EvalSet, path: Path) -> None:
    verdict = evals.screen_source(path.read_text(), THRESHOLD)
    assert not verdict.flagged, (path.stem, verdict.rules, verdict.detail)
    assert verdict.rule == "" and verdict.detail == ""
    assert verdict.ast_nearest is not None and verdict.ast_nearest.ast < THRESHOLD
    assert verdict.nearest is not None and verdict.nearest.score < 1.0


@pytest.mark.parametrize("path", _files("chains"), ids=lambda p: p.stem)
def test_a_chain_of_level1_tasks_is_flagged_only_by_eval_composition(
        evals: EvalSet, evals_without_composition: EvalSet, path: Path) -> None:
    verdict = evals.screen_source(path.read_text(), THRESHOLD)
    assert verdict.rules == (EVAL_COMPOSITION,)
    assert len(verdict.matched) >= 2 and all(m.name.startswith("level1/") for m in verdict.matched)
    assert not evals_without_composition.screen_source(path.read_text(), THRESHOLD).flagged


def test_a_padded_rewrite_needs_eval_composition(evals: EvalSet, evals_without_composition: EvalSet) -> None:
    """ReLU times one: no rule but eval_composition sees it (docs/data.md: Choosing the verdicts)."""
    source = (FIXTURES / "padded" / "relu_times_one.py").read_text()
    verdict = evals.screen_source(source, THRESHOLD)
    assert verdict.rule == EVAL_COMPOSITION
    assert [m.name for m in verdict.matched] == ["level1/19_ReLU", "level1/5_Matrix_scalar_multiplication"]
    assert not evals_without_composition.screen_source(source, THRESHOLD).flagged


def test_both_rules_are_listed_when_both_match(evals: EvalSet) -> None:
    """An AST near-copy is also the same operators: the first rule is the one synthesis rejects with."""
    verdict = evals.screen_source((FIXTURES / "rewrites" / "relu_method.py").read_text(), THRESHOLD)
    assert verdict.rules == (AST_SIMILARITY, SAME_OPS)
    assert verdict.detail.startswith("similarity 0.9") and verdict.meta()["eval_verdict"] == SAME_OPS


def test_elementwise_maximum_with_zeros_is_relu_but_a_max_over_axis_0_is_not() -> None:
    head = "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return "
    assert op_form(head + "torch.maximum(x, torch.zeros_like(x))\n").ops == ("relu",)
    assert op_form(head + "x.clamp_min(0)\n").ops == ("relu",)
    assert op_form(head + "torch.max(x, 0)[0]\n").ops == ("max",)


# ---- the CLI ------------------------------------------------------------------------------------
def _invoke(*args: str):
    from cuda_agent.cli import app

    return CliRunner().invoke(app, ["data", "similarity", *args])


def test_cli_json_shows_rule_matched_task_path_and_ast_per_row() -> None:
    r = _invoke(str(FIXTURES / "rewrites"), str(KERNELBENCH), "--json")
    assert r.exit_code == 1, r.output  # some task flagged
    out = json.loads(r.output)
    assert out["screened"] == out["flagged"] == len(_files("rewrites")) and out["eval_tasks"] == 27
    assert out["verdicts"] == list(VERDICTS) and not out["not_loaded"]
    rows = {Path(r["path"]).stem: r for r in out["rows"]}
    gemm = rows["gemm_mul_leaky_matmul"]
    assert gemm["flagged"] and gemm["rule"] == SAME_PRIMITIVES
    assert gemm["matched"][0]["name"] == "level2/12_Gemm_Multiply_LeakyReLU"
    assert gemm["matched"][0]["path"].endswith("level2/12_Gemm_Multiply_LeakyReLU.py")
    assert gemm["matched"][0]["ast"] < 0.5 and "primitives of" in gemm["detail"]
    assert gemm["canonical_ops"] == ["matmul", "add", "mul", "leakyrelu"]
    assert out["by_rule"] == {k: sum(1 for row in out["rows"] if row["rule"] == k) for k in out["by_rule"]}


def test_cli_text_names_the_verdict_and_exits_clean_for_different_tasks() -> None:
    r = _invoke(str(FIXTURES / "rewrites" / "relu_clamp_min.py"), str(KERNELBENCH), "--top", "2")
    assert r.exit_code == 1, r.output
    lines = r.output.splitlines()
    assert len(lines) == 3 and lines[0].startswith("0.")  # the two most similar by AST, then the verdict
    assert lines[2].startswith("FLAGGED relu_clamp_min.py: same_ops -> level1/19_ReLU (")
    assert "19_ReLU.py, AST 0.500)" in lines[2]
    r = _invoke(str(FIXTURES / "different"), str(KERNELBENCH))
    assert r.exit_code == 0, r.output
    assert r.output.count("clean ") == len(_files("different")) and "0 of 7 tasks flagged" in r.output


def test_cli_verdicts_option_picks_the_rules() -> None:
    chains = str(FIXTURES / "chains")
    r = _invoke(chains, str(KERNELBENCH), "--verdicts", "same_ops,same_primitives", "--json")
    assert r.exit_code == 0 and json.loads(r.output)["flagged"] == 0, r.output
    r = _invoke(str(FIXTURES / "rewrites"), str(KERNELBENCH), "--verdicts", "none", "--json")
    assert set(json.loads(r.output)["by_rule"]) == {AST_SIMILARITY}
    r = _invoke(chains, str(KERNELBENCH), "--verdicts", "same_opz")
    assert r.exit_code == 2 and "same_opz" in r.output


def test_cli_counts_a_task_to_screen_that_does_not_load(tmp_path: Path) -> None:
    (tmp_path / "1_broken.py").write_text("class Model(:\n")
    (tmp_path / "2_relu.py").write_text((FIXTURES / "rewrites" / "relu_where.py").read_text())
    r = _invoke(str(tmp_path), str(KERNELBENCH))
    assert r.exit_code == 1, r.output
    assert "FLAGGED" in r.output and "relu" in r.output and "1_broken.py" in r.output
    assert "1 of 2 task(s) to screen could not be loaded" in r.output
