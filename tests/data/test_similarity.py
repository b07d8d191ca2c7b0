"""The AST similarity measure on known pairs, and the sparse index against brute force."""

from __future__ import annotations

import random

import pytest

from cuda_agent.data.similarity import SimilarityError, SimilarityIndex, fingerprint, similarity

RELU = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    """Simple model that performs a ReLU activation."""
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Applies ReLU."""
        return torch.relu(x)

batch_size = 16
dim = 16384

def get_inputs():
    x = torch.rand(batch_size, dim)
    return [x]

def get_init_inputs():
    return []
'''

# The same task, disguised: other names, sizes, docstrings, annotations, layout and super() call.
RELU_DISGUISED = '''
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, inp):
        # a comment
        return torch.relu(inp)


N = 4096
D = 8192


def get_inputs():
    t = torch.randn(N, D)
    return [t]


def get_init_inputs():
    return []
'''

# As composed tasks are written: one statement per operator, inputs built inline.
RELU_STATEMENTS = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    """torch.relu."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = torch.relu(x)
        return x


batch_size = 64
features = 1024


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return []
'''

SIGMOID = RELU.replace("torch.relu", "torch.sigmoid").replace("ReLU", "Sigmoid")

CONV_RELU_BIAS = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        x = self.conv(x)
        x = torch.relu(x)
        x = x + self.bias
        return x

batch_size = 128
in_channels = 3
out_channels = 16
height = width = 32
kernel_size = 3
bias_shape = (out_channels, 1, 1)

def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size, bias_shape]
'''

CONV_GELU_BIAS = CONV_RELU_BIAS.replace("torch.relu(x)", "torch.nn.functional.gelu(x)")
CONV_RELU_BIAS_RENAMED = (CONV_RELU_BIAS.replace("self.conv", "self.conv_layer").replace("self.bias", "self.b")
                          .replace("x = ", "y = ").replace("(x)", "(y)").replace("x + ", "y + ")
                          .replace("return x", "return y").replace("def forward(self, x)", "def forward(self, y)")
                          .replace("128", "64").replace("32", "224"))
MATMUL = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, A, B):
        return torch.matmul(A, B)

M, K, N = 1024, 4096, 2048

def get_inputs():
    return [torch.rand(M, K), torch.rand(K, N)]

def get_init_inputs():
    return []
'''


def test_identical_and_disguised_copies_score_one() -> None:
    assert similarity(RELU, RELU) == 1.0
    assert similarity(RELU, RELU_DISGUISED) == 1.0
    assert similarity(RELU, RELU_STATEMENTS) == 1.0  # statement-per-op folds into one expression
    assert similarity(CONV_RELU_BIAS, CONV_RELU_BIAS_RENAMED) == 1.0


def test_another_operator_is_not_a_copy() -> None:
    assert similarity(RELU, SIGMOID) < 0.9  # same shape of code, another operator
    assert 0.5 < similarity(CONV_RELU_BIAS, CONV_GELU_BIAS) < 0.9  # one of three operators swapped
    assert similarity(RELU, MATMUL) < 0.5
    assert similarity(CONV_RELU_BIAS, MATMUL) < 0.5


def test_similarity_is_symmetric_and_bounded() -> None:
    sources = [RELU, SIGMOID, CONV_RELU_BIAS, CONV_GELU_BIAS, MATMUL]
    for a in sources:
        for b in sources:
            s = similarity(a, b)
            assert 0.0 <= s <= 1.0
            assert s == pytest.approx(similarity(b, a))


def test_unparsable_source_is_a_clear_error() -> None:
    with pytest.raises(SimilarityError, match="does not parse"):
        fingerprint("def broken(:\n")


def _variants(n: int) -> list[str]:
    """Many distinct task sources: random chains of activations over random operand names."""
    rng = random.Random(7)
    ops = ["relu", "sigmoid", "tanh", "exp", "abs", "sin", "cos", "neg", "sqrt", "erf", "floor", "ceil"]
    out = []
    for _ in range(n):
        chain = "\n        ".join(f"x = torch.{rng.choice(ops)}(x)" for _ in range(rng.randint(1, 4)))
        out.append(RELU.replace("return torch.relu(x)", f"{chain}\n        return x"))
    return out


def test_index_matches_brute_force() -> None:
    refs = _variants(70) + [CONV_RELU_BIAS, MATMUL]
    queries = _variants(15)[5:] + [RELU_DISGUISED, CONV_GELU_BIAS, SIGMOID]
    index = SimilarityIndex()
    index.extend(refs)
    assert len(index) == len(refs)
    got = index.best_many(queries)
    for q, match in zip(queries, got):
        scores = [similarity(q, r) for r in refs]
        assert match.score == pytest.approx(max(scores), abs=1e-6)
        assert scores[match.index] == pytest.approx(max(scores), abs=1e-6)
    assert index.best(refs[3]).score == pytest.approx(1.0)


def test_empty_index_reports_no_match() -> None:
    match = SimilarityIndex().best(RELU)
    assert match.score == 0.0 and match.index == -1
