"""The model_new.py grammar every language holds a workspace to: honest models give no findings,
every known hack gives the right rule."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from cuda_agent.languages.model_new_rules import check_model_new
from cuda_agent.languages.records import RULES, Finding

PKG = Path(__file__).resolve().parents[2] / "src" / "cuda_agent"
EXT = {"cuda": "cuda_extension", "cpu": "cpu_extension"}


def _py(src: str, backend: str = "cuda") -> list[Finding]:
    return check_model_new(textwrap.dedent(src), EXT[backend])


def _show(found: list[Finding]) -> str:
    return "\n".join(f"{f.file}:{f.line} [{f.rule}] {f.message}" for f in found)


# ---- honest code: zero findings ------------------------------------------------------------
HONEST_MODELS = {
    "linear weights passed to an op": """
        import torch
        import torch.nn as nn
        import cuda_extension

        class ModelNew(nn.Module):
            def __init__(self, in_features: int, out_features: int):
                super().__init__()
                self.linear = nn.Linear(in_features, out_features)
                nn.init.zeros_(self.linear.bias)

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                w = self.linear.weight
                return cuda_extension.linear(x.contiguous(), w.t().contiguous(), self.linear.bias)
    """,
    "shape arithmetic and allocation": """
        import math
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
        import cuda_extension

        class ModelNew(nn.Module):
            def __init__(self, dim: int, scale: float = 0.5):
                super().__init__()
                self.dim = dim
                self.scale = scale
                self.register_buffer("mask", torch.tril(torch.ones(8, 8)) * 2)

            def forward(self, x, y: int = 3):
                b, n = x.shape
                out = torch.empty(b, n * 2, device=x.device, dtype=x.dtype)
                rows = x.size(0) * 4 + len(x.shape) - int(math.sqrt(16))
                k = max(x.size(-1) // 2, 1)
                if x.dim() != 2 or x.dtype == torch.float16 or out is None:
                    raise ValueError("bad input")
                v = x.view(-1, 4).contiguous()
                parts = [p.contiguous() for p in x.split(2, dim=0)]
                cuda_extension.fill(out, v, self.mask, rows, k, y + 1, self.scale * 2, parts)
                return out
    """,
    "tuple outputs and a helper": """
        from typing import Optional
        import torch
        from torch import nn
        import cuda_extension as ext

        class ModelNew(nn.Module):
            def __init__(self, hidden):
                super().__init__()
                self.weight = nn.Parameter(torch.randn(hidden, hidden))
                self.ln = nn.LayerNorm(hidden)

            def _rows(self, x):
                return x.numel() // x.size(-1)

            def forward(self, x, bias: Optional[torch.Tensor] = None):
                n = self._rows(x)
                a, b = ext.split_norm(x.contiguous(), self.weight, self.ln.weight, self.ln.bias, self.ln.eps, n * 2)
                if bias is not None:
                    a = ext.add_bias(a, bias)
                return a, b.view(n, -1)
    """,
    "starter leftovers: get_inputs and constants": """
        import torch
        import torch.nn as nn
        import cpu_extension

        class ModelNew(nn.Module):
            def forward(self, x):
                return cpu_extension.relu(x.contiguous())

        batch_size = 16
        dim = batch_size * 2

        def get_inputs():
            return [torch.randn(batch_size, dim)]

        def get_init_inputs():
            return []

        if __name__ == "__main__":
            m = ModelNew()
            x = get_inputs()[0]
            print((m(x) - torch.relu(x)).abs().max())
    """,
    "realistic conv with buffers, workspace and shape math": """
        import math
        import torch
        import torch.nn as nn
        import cuda_extension

        def _cdiv(a, b):
            return (a + b - 1) // b

        class ModelNew(nn.Module):
            def __init__(self, in_channels, out_channels, kernel_size, stride=1):
                super().__init__()
                self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride, padding=kernel_size // 2)
                self.bn = nn.BatchNorm2d(out_channels)
                self.weight = nn.Parameter(torch.empty(out_channels, in_channels))
                nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
                self.register_buffer("scale", torch.ones(out_channels) / math.sqrt(out_channels))
                self._ws = None

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                N, C, H, W = x.shape
                if not x.is_contiguous():
                    x = x.contiguous()
                x = x.to(torch.float16) if x.dtype == torch.float32 and self.training else x
                assert x.is_cuda and x.dim() == 4, "bad"
                oh = (H + 2 * self.conv.padding[0] - self.conv.kernel_size[0]) // self.conv.stride[0] + 1
                tiles = _cdiv(oh * W, 128)
                if self._ws is None or self._ws.numel() < tiles:
                    self._ws = torch.empty(tiles, device=x.device, dtype=torch.float32)
                out = x.new_empty((N, self.conv.out_channels, oh, W))
                cuda_extension.conv_bn_relu(x, self.conv.weight, self.conv.bias, self.bn.running_mean,
                                            self.bn.running_var, self.bn.weight, self.bn.bias, self.bn.eps,
                                            self.scale, out, self._ws, self.conv.stride[0], tiles)
                outs = []
                for i in range(N):
                    outs.append(out[i].view(-1))
                names = ",".join(str(s) for s in x.shape).split(",")
                names.sort()
                seen = set()
                seen.add(len(names))
                table = {"a": 1}
                total = sum(table.values()) + names.index(names[0])
                shape = list(x.shape)
                shape[-1] = shape[-1] * 2
                n = math.prod(shape) * 2 + x.numel() // 4 - len(outs) + total
                return out.view(N, -1, oh, W), tuple(outs), n

            def extra_repr(self) -> str:
                return f"c={self.conv.out_channels}"
    """,
    "attention through torch.ops, aliases and a local block": """
        from __future__ import annotations
        from typing import Optional, Tuple
        import math
        import torch
        from torch import nn, Tensor
        import torch.nn.functional as F
        import cuda_extension as ext
        from cuda_extension import attention

        class ModelNew(nn.Module):
            def __init__(self, d_model: int, n_heads: int, max_len: int = 1024):
                super().__init__()
                self.n_heads = n_heads
                self.head_dim = d_model // n_heads
                self.qkv = nn.Linear(d_model, 3 * d_model)
                self.proj = nn.Linear(d_model, d_model)
                mask = torch.tril(torch.ones(max_len, max_len))
                self.register_buffer("bias", mask.view(1, 1, max_len, max_len))
                self.softmax_scale = 1.0 / math.sqrt(self.head_dim)
                self.blocks = nn.ModuleList([Block() for _ in range(2)])

            def _split(self, t: Tensor, B: int, T: int) -> Tensor:
                return t.view(B, T, self.n_heads, self.head_dim).transpose(1, 2).contiguous()

            @torch.no_grad()
            def forward(self, x: Tensor, mask: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
                B, T, C = x.size()
                qkv = ext.linear(x.reshape(B * T, C), self.qkv.weight, self.qkv.bias)
                q, k, v = qkv.split(C, dim=1)
                q, k, v = self._split(q, B, T), self._split(k, B, T), self._split(v, B, T)
                y = attention(q, k, v, self.bias[:, :, :T, :T], self.softmax_scale, T > 1)
                for blk in self.blocks:
                    y = blk(y)
                y = y.transpose(1, 2).reshape(B * T, C)
                out = torch.ops.cuda_extension.linear(y, self.proj.weight, self.proj.bias)
                return out.view(B, T, C), k

        class Block(nn.Module):
            def forward(self, t):
                return ext.identity(t)
    """,
}


@pytest.mark.parametrize("name", sorted(HONEST_MODELS))
def test_honest_model_new_is_clean(name: str) -> None:
    backend = "cpu" if "cpu_extension" in HONEST_MODELS[name] else "cuda"
    found = _py(HONEST_MODELS[name], backend)
    assert found == [], _show(found)


# ---- adversarial code: the right rule -----------------------------------------------------
def _wrap(body: str, header: str = "") -> str:
    return (f"import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\nimport cuda_extension\n"
            f"{header}\nclass ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            f"        self.linear = nn.Linear(4, 4)\n        self.scale = 2.0\n"
            f"    def forward(self, x, w):\n" + textwrap.indent(textwrap.dedent(body), " " * 8))


PY_HACKS = [
    ("return torch.relu(x)", "torch-compute"),
    ("return F.gelu(x)", "torch-compute"),
    ("return x.softmax(-1)", "tensor-method-compute"),
    ("return x @ w", "matmul-operator"),
    ("return x * 2", "tensor-arithmetic"),
    ("y = cuda_extension.f(x)\nreturn y + w", "tensor-arithmetic"),
    ("return -x", "tensor-arithmetic"),
    ("x += 1\nreturn x", "tensor-arithmetic"),
    ("return cuda_extension.f(x) * self.scale", "tensor-arithmetic"),
    ("return x > 0", "tensor-arithmetic"),
    ("return sum([x, w])", "tensor-arithmetic"),
    ("return x.__mul__(w)", "tensor-arithmetic"),
    ("return x.__matmul__(w)", "matmul-operator"),
    ("return self.linear(x)", "torch-compute"),
    ("return self.linear.forward(x)", "torch-compute"),
    ("f = self.linear\nreturn f(x)", "torch-compute"),
    ("return nn.ReLU()(x)", "torch-compute"),
    ("return torch.ops.aten.mm(x, w)", "torch-compute"),
    ("return torch._C._nn.linear(x, w)", "torch-compute"),
    ('return getattr(torch, "relu")(x)', "torch-compute"),
    ('return getattr(x, "softmax")(-1)', "tensor-method-compute"),
    ("name = 'relu'\nreturn getattr(torch, name)(x)", "dynamic-code"),
    ("return torch.Tensor.softmax(x, -1)", "torch-compute"),
    ("return torch.matmul(x, w)", "torch-compute"),
    ("return torch.compile(lambda t: t)(x)", "torch-compute"),
    ("torch.backends.cuda.matmul.allow_tf32 = True\nreturn x", "monkeypatch"),
    ("try:\n    return cuda_extension.f(x)\nexcept Exception:\n    return torch.relu(x)", "silent-fallback"),
    ("try:\n    return cuda_extension.f(x)\nexcept Exception:\n    pass", "silent-fallback"),
    ("torch.nn.functional.relu = lambda t: t\nreturn x", "monkeypatch"),
    ('setattr(torch, "relu", None)\nreturn x', "monkeypatch"),
    ('exec("y = 1")\nreturn x', "dynamic-code"),
    ('return eval("x")', "dynamic-code"),
    ("return x.__class__.__mro__", "dynamic-code"),
    ('open("/tmp/out").read()\nreturn x', "io-access"),
    ("global CACHE\nreturn x", "global-state"),
    ("s = torch.cuda.Stream()\nreturn x", "stream-creation"),
    ("with torch.cuda.stream(None):\n    return cuda_extension.f(x)", "stream-creation"),
    ("return x.numpy()", "tensor-method-compute"),
    ("return x.sum().item()", "tensor-method-compute"),
    ("m = x.max(dim=0)\nreturn m", "tensor-method-compute"),
    ("return self._helper(x)", "tensor-arithmetic"),
    ("f = lambda t: t * 2\nreturn f(x)", "tensor-arithmetic"),
    ("return list(map(lambda t: t + 1, [x]))", "tensor-arithmetic"),
    ("a = [cuda_extension.f(x)]\nreturn a[0] - w", "tensor-arithmetic"),
    ("return x.clamp(min=0)", "tensor-method-compute"),
    ("out = cuda_extension.f(x)\nout.add_(1)\nreturn out", "tensor-method-compute"),
    ("return type(x).relu(x)", "tensor-method-compute"),
    ("return max(x, w)", "tensor-arithmetic"),
    ("import operator\nreturn operator.mul(x, w)", "tensor-arithmetic"),
    ("return vars(torch)['relu'](x)", "dynamic-code"),
    ("return torch.ops.load_library('x.so')", "torch-compute"),
    ("import sys\nsys.exit(0)", "forbidden-import"),
    ("exit(0)", "dynamic-code"),
]


@pytest.mark.parametrize("body,rule", PY_HACKS, ids=[b.splitlines()[0][:40] for b, _ in PY_HACKS])
def test_python_hack_is_found(body: str, rule: str) -> None:
    src = _wrap(body) + "\n    def _helper(self, t):\n        return t * 3\n"
    found = check_model_new(src, "cuda_extension")
    assert rule in {f.rule for f in found}, f"expected {rule}:\n{_show(found)}"
    assert all(f.rule in RULES and f.message and f.line >= 1 for f in found)


@pytest.mark.parametrize("header,rule", [
    ("import gc", "forbidden-import"),
    ("import model", "forbidden-import"),
    ("from model import Model", "forbidden-import"),
    ("import os", "forbidden-import"),
    ("import numpy as np", "forbidden-import"),
    ("import triton", "forbidden-import"),
    ("import cpu_extension", "forbidden-import"),
    ("from torch.utils.cpp_extension import load_inline", "forbidden-import"),
    ("from torch import *", "forbidden-import"),
    ("from . import helper", "forbidden-import"),
    ("import importlib", "forbidden-import"),
    ("W = torch.randn(4, 4)", "torch-compute"),
    ("torch.manual_seed(0)", "torch-compute"),
    ("class Lazy(torch.Tensor):\n    pass", "tensor-subclass"),
    ("class Block(nn.Linear):\n    pass", "torch-compute"),
])
def test_python_module_level_hack_is_found(header: str, rule: str) -> None:
    found = check_model_new(_wrap("return cuda_extension.f(x)", header), "cuda_extension")
    assert rule in {f.rule for f in found}, f"expected {rule}:\n{_show(found)}"


def test_memoised_helper_taking_tensors() -> None:
    src = _wrap("return run(x)", "import functools\n@functools.lru_cache(maxsize=None)\n"
                "def run(t):\n    return cuda_extension.f(t)\n")
    assert "output-caching" in {f.rule for f in check_model_new(src, "cuda_extension")}


@pytest.mark.parametrize("task", sorted(PKG.glob("examples/*/task.py")), ids=lambda p: p.parent.name)
def test_the_starter_reference_is_flagged(task: Path) -> None:
    """The starter model_new.py is the reference renamed: all torch, so never clean."""
    src = task.read_text().replace("class Model(", "class ModelNew(")
    rules = {f.rule for f in check_model_new(src, "cuda_extension")}
    assert rules & {"torch-compute", "tensor-arithmetic", "matmul-operator"}, rules


def test_init_may_compute_but_not_bind_compute() -> None:
    ok = _wrap("return cuda_extension.f(x, self.mask)").replace(
        "self.scale = 2.0", "self.register_buffer('mask', torch.tril(torch.ones(4, 4)).exp() * 2)")
    assert check_model_new(ok, "cuda_extension") == []
    bad = _wrap("return self.act(x)").replace("self.scale = 2.0", "self.act = torch.relu")
    assert "torch-compute" in {f.rule for f in check_model_new(bad, "cuda_extension")}


def test_compute_module_in_a_container_or_loop() -> None:
    src = _wrap("for layer in self.layers:\n    x = layer(x)\nreturn self.seq[0](x)").replace(
        "self.scale = 2.0", "self.layers = nn.ModuleList([nn.Linear(4, 4)])\n        "
        "self.seq = nn.Sequential(nn.Linear(4, 4))")
    lines = sorted(f.line for f in check_model_new(src, "cuda_extension") if f.rule == "torch-compute")
    assert len(lines) == 2, lines


def test_findings_carry_line_and_file() -> None:
    found = check_model_new("import torch\n\nimport cuda_extension\nx = 1\ny = torch.relu(torch.ones(2))\n",
                            "cuda_extension", filename="model_new.py")
    assert [(f.file, f.line, f.rule) for f in found] == [("model_new.py", 5, "torch-compute")]
    assert "torch.relu" in found[0].message


def test_syntax_error_is_a_finding() -> None:
    assert [f.rule for f in check_model_new("def (:\n", "cuda_extension")] == ["syntax-error"]


def test_every_rule_is_documented() -> None:
    assert all(re.fullmatch(r"[a-z0-9-]+", r) and d for r, d in RULES.items())
