"""Triton's own attacks on the static allowlist: every attack in the catalogue is found under
the rule it names, and the honest solutions and idioms produce no finding (so the allowlist
never punishes a legitimate kernel)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.languages import get_language
from cuda_agent.languages.records import RULES
from cuda_agent.languages.triton.rules import check_triton_file

from .catalogue import HONEST, RUNTIME_ATTACKS, STATIC_ATTACKS

EXAMPLES = Path(__file__).resolve().parents[3] / "src" / "cuda_agent" / "examples"
SWISH_MODEL_NEW = "import torch.nn as nn\nimport triton_extension\n\n\nclass ModelNew(nn.Module):\n" \
                  "    def forward(self, x):\n        return triton_extension.swish(x.contiguous())\n"


def _workspace(tmp_path: Path, kernel: str | None) -> Path:
    (tmp_path / "kernels").mkdir(parents=True)
    (tmp_path / "model_new.py").write_text(SWISH_MODEL_NEW)
    if kernel is None:  # a prebuilt object instead of Python kernels
        (tmp_path / "kernels" / "swish.py").write_text(HONEST)
        (tmp_path / "kernels" / "fast.so").write_bytes(b"\x7fELF")
    else:
        (tmp_path / "kernels" / "swish.py").write_text(kernel)
    return tmp_path


@pytest.mark.parametrize("name", sorted(STATIC_ATTACKS))
def test_static_attack_is_found(name: str, tmp_path: Path) -> None:
    rule, kernel = STATIC_ATTACKS[name]
    assert rule in RULES
    findings = get_language("triton").check(_workspace(tmp_path, kernel), "cuda")
    assert rule in {f.rule for f in findings}, (name, findings)


def test_honest_swish_has_no_finding(tmp_path: Path) -> None:
    assert get_language("triton").check(_workspace(tmp_path, HONEST), "cuda") == []


@pytest.mark.parametrize("example", ["swish", "softmax", "layernorm", "sum_reduction"])
def test_bundled_triton_solutions_are_clean(example: str) -> None:
    assert get_language("triton").check(EXAMPLES / example / "triton", "cuda") == []


HONEST_IDIOMS = {
    "autotune + grid lambda": '''import torch
import triton
import triton.language as tl

CONFIGS = [triton.Config({"BLOCK": 1024}, num_warps=4), triton.Config({"BLOCK": 2048}, num_warps=8)]


@triton.autotune(configs=CONFIGS, key=["n"])
@triton.jit
def _k(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


def copy(x):
    out = torch.empty_like(x)
    n = x.numel()
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)
    _k[grid](x, out, n)
    return out
''',
    "libdevice, heuristics, shapes and strides": '''import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.heuristics({"EVEN": lambda args: args["n_cols"] % args["BLOCK"] == 0})
@triton.jit
def _k(x_ptr, out_ptr, stride, n_cols, EVEN: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + cols, mask=cols < n_cols)
    tl.store(out_ptr + row * stride + cols, libdevice.tanh(x), mask=cols < n_cols)


def tanh_rows(x, scale: float = 1.0):
    assert x.is_contiguous() and x.dtype == torch.float32
    m, n = x.shape
    out = torch.empty((m, n), dtype=x.dtype, device=x.device)
    block = max(triton.next_power_of_2(n), 16)
    _k[(m,)](x, out, x.stride(0), n, BLOCK=block)
    return out.view(m, n)
''',
}


@pytest.mark.parametrize("name", sorted(HONEST_IDIOMS))
def test_honest_idioms_pass(name: str) -> None:
    assert check_triton_file(HONEST_IDIOMS[name], "kernels/k.py") == []


def test_runtime_attacks_pass_the_allowlist_when_it_is_on(tmp_path: Path) -> None:
    """The runtime catalogue is meant for the judge: those run with static checks on must
    get past them, else the GPU run would test the allowlist twice and the judge never."""
    for i, (name, (_, kernel, static_on)) in enumerate(sorted(RUNTIME_ATTACKS.items())):
        ws = _workspace(tmp_path / str(i), kernel)
        findings = get_language("triton").check(ws, "cuda")
        assert (findings == []) == static_on, (name, findings)


def test_relative_imports_only_name_siblings() -> None:
    ok = check_triton_file("from .common import helper\n", "kernels/a.py", frozenset({"common"}))
    bad = check_triton_file("from .elsewhere import helper\n", "kernels/a.py", frozenset({"common"}))
    assert ok == [] and [f.rule for f in bad] == ["forbidden-import"]
