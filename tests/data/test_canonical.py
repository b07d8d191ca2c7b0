"""The semantic contamination measure: operators normalised across spellings, composites
expanded, sizes ignored; the issue's cases (renamed ReLU, nn.ReLU module, KernelBench's
Gemm_Multiply_LeakyReLU in the generator's style, a lone Conv1d, ConvTranspose1d + RMSNorm)
are each caught against small evaluation fixtures written here."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.data.canonical import (EVAL_COMPOSITION, SAME_OPS, SAME_PRIMITIVES, ContaminationIndex,
                                       canonical_name, op_form)
from cuda_agent.data.screen import EvalSet

HEAD = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"
TAIL = "\nbatch_size = {b}\ndim = {d}\n\ndef get_inputs():\n    return [torch.rand(batch_size, dim)]\n\n" \
       "def get_init_inputs():\n    return {init}\n"


def task(init: str, forward: str, *, ctor: str = "self", b: int = 16, d: int = 16384, init_inputs: str = "[]") -> str:
    body = "\n".join(f"        {line}" for line in forward.strip().splitlines())
    inits = "\n".join(f"        {line}" for line in init.strip().splitlines()) if init.strip() else ""
    return (HEAD + f"class Model(nn.Module):\n    def __init__({ctor}):\n        super().__init__()\n{inits}\n\n"
            f"    def forward(self, x):\n{body}\n" + TAIL.format(b=b, d=d, init=init_inputs))


# ---- the evaluation fixtures (KernelBench-like, written here) ----------------------------------
EVAL = {
    "level1/19_ReLU": task("", "return torch.relu(x)"),
    "level1/20_LeakyReLU": task("", "return torch.nn.functional.leaky_relu(x, negative_slope=0.01)"),
    "level1/21_Sigmoid": task("", "return torch.sigmoid(x)"),
    "level1/25_Swish": task("", "return x * torch.sigmoid(x)"),
    "level1/36_RMSNorm_": task("self.eps = 1e-5", "rms = torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + self.eps)\n"
                               "return x / rms", ctor="self, num_features"),
    "level1/64_conv_transposed_1D": task("self.conv1d_transpose = nn.ConvTranspose1d(c_in, c_out, k, bias=False)",
                                         "return self.conv1d_transpose(x)", ctor="self, c_in, c_out, k"),
    "level1/67_conv_standard_1D": task("self.conv1d = nn.Conv1d(c_in, c_out, k, stride=1)", "return self.conv1d(x)",
                                       ctor="self, c_in, c_out, k"),
    "level2/12_Gemm_Multiply_LeakyReLU": task(
        "self.gemm = nn.Linear(in_features, out_features)\nself.multiplier = multiplier\n"
        "self.leaky_relu = nn.LeakyReLU(negative_slope)",
        "x = self.gemm(x)\nx = x * self.multiplier\nx = self.leaky_relu(x)\nreturn x",
        ctor="self, in_features, out_features, multiplier, negative_slope", b=1024, d=8192,
        init_inputs="[8192, 8192, 2.0, 0.1]"),
}


@pytest.fixture(scope="module")
def index() -> ContaminationIndex:
    idx = ContaminationIndex()
    for name, source in EVAL.items():
        idx.add(name, op_form(source))
    return idx


# ---- the issue's cases, written as the generator writes tasks ------------------------------------
GENERATED = {  # (source, expected verdict, expected nearest task)
    "renamed ReLU": (EVAL["level1/19_ReLU"].replace("forward(self, x)", "forward(self, inp)")
                     .replace("torch.relu(x)", "torch.relu(inp)").replace("16384", "4096"),
                     SAME_OPS, "level1/19_ReLU"),
    "ReLU as an nn.ReLU module": (task("self.re_lu = nn.ReLU()", "x = self.re_lu(x)\nreturn x"), SAME_OPS,
                                  "level1/19_ReLU"),
    "ReLU as a method, in place": (task("", "return x.relu_()"), SAME_OPS, "level1/19_ReLU"),
    "ReLU as clamp(min=0)": (task("", "return torch.clamp(x, min=0)"), SAME_OPS, "level1/19_ReLU"),
    "ReLU built inline": (task("", "return nn.ReLU(inplace=True)(x)"), SAME_OPS, "level1/19_ReLU"),
    "Gemm_Multiply_LeakyReLU, generator style": (
        task("self.linear = nn.Linear(in_features, out_features)\nself.leaky_re_lu = nn.LeakyReLU(0.1)",
             "x = self.linear(x)\nx = torch.mul(x, 2.0)\nx = self.leaky_re_lu(x)\nreturn x",
             ctor="self, in_features, out_features", b=1024, d=8192, init_inputs="[8192, 8192]"),
        SAME_OPS, "level2/12_Gemm_Multiply_LeakyReLU"),
    "Gemm_Multiply_LeakyReLU, functional, reordered statements": (
        task("self.weight = nn.Parameter(torch.randn(8192, 8192))\nself.bias = nn.Parameter(torch.randn(8192))",
             "y = F.leaky_relu(F.linear(x, self.weight, self.bias).multiply(2.0), 0.1)\nreturn y"),
        SAME_OPS, "level2/12_Gemm_Multiply_LeakyReLU"),
    "a lone nn.Conv1d": (task("self.conv1d = nn.Conv1d(in_channels, out_channels, kernel_size)",
                              "x = self.conv1d(x)\nreturn x", ctor="self, in_channels, out_channels, kernel_size"),
                         SAME_OPS, "level1/67_conv_standard_1D"),
    "a lone functional conv1d": (task("self.weight = nn.Parameter(torch.randn(64, 128, 3))",
                                      "return F.conv1d(x, self.weight)"), SAME_OPS, "level1/67_conv_standard_1D"),
    "ConvTranspose1d + transformers RMSNorm": (
        "from transformers.models.hy_v4.modeling_hy_v4 import HYV4UnweightedRMSNorm\n" + task(
            "self.conv_transpose1d = nn.ConvTranspose1d(in_channels, out_channels, kernel_size)\n"
            "self.hyv4_unweighted_rms_norm = HYV4UnweightedRMSNorm()",
            "x = self.conv_transpose1d(x)\nx = self.hyv4_unweighted_rms_norm(x)\nreturn x",
            ctor="self, in_channels, out_channels, kernel_size"), EVAL_COMPOSITION, None),
    "SiLU module vs the manual Swish": (task("self.silu = nn.SiLU()", "return self.silu(x)"), SAME_PRIMITIVES,
                                        "level1/25_Swish"),
    "nn.RMSNorm vs the manual RMSNorm": (task("self.norm = nn.RMSNorm([16384])", "return self.norm(x)"),
                                         SAME_PRIMITIVES, "level1/36_RMSNorm_"),
}


@pytest.mark.parametrize("case", sorted(GENERATED))
def test_issue_cases_are_caught(index: ContaminationIndex, case: str) -> None:
    source, verdict, nearest = GENERATED[case]
    got = index.check(op_form(source))
    assert got.verdict == verdict, (case, op_form(source), got)
    if nearest:
        assert got.name == nearest and got.score == 1.0


NOT_CONTAMINATED = {
    "Sigmoid then Tanh then cumsum": task("", "x = torch.sigmoid(x)\nx = torch.tanh(x)\nreturn torch.cumsum(x, 1)"),
    "Linear then GELU": task("self.fc = nn.Linear(64, 64)", "return F.gelu(self.fc(x))"),
    "Conv1d then hardswish": task("self.conv = nn.Conv1d(3, 8, 3)", "return F.hardswish(self.conv(x))"),
    "ReLU then Sigmoid": task("", "return torch.sigmoid(torch.relu(x)) + 1"),  # plus add: no eval task alone
}


@pytest.mark.parametrize("case", sorted(NOT_CONTAMINATED))
def test_other_tasks_are_not_flagged(index: ContaminationIndex, case: str) -> None:
    got = index.check(op_form(NOT_CONTAMINATED[case]))
    assert got.verdict == "", (case, got)
    assert got.score < 1.0 and got.name in EVAL


def test_nearest_is_reported_with_order() -> None:
    idx = ContaminationIndex()
    for name, source in EVAL.items():
        idx.add(name, op_form(source))
    near = idx.check(op_form(task("self.fc = nn.Linear(8, 8)", "return torch.tanh(self.fc(x) * 3)")))
    assert near.name == "level2/12_Gemm_Multiply_LeakyReLU" and 0.5 < near.score < 1.0
    assert near.order == pytest.approx(2 / 3)  # linear, mul in order; tanh vs leakyrelu


@pytest.mark.parametrize("spellings", [
    ["torch.nn.ReLU", "torch.nn.functional.relu", "torch.relu", "x.relu", "x.relu_", "relu"],
    ["nn.LeakyReLU", "F.leaky_relu", "torch.nn.functional.leaky_relu_", "x.leaky_relu"],
    ["nn.Softmax", "F.softmax", "torch.special.softmax", "x.softmax", "torch.softmax"],
    ["nn.ConvTranspose1d", "F.conv_transpose1d", "torch.conv_transpose1d"],
    ["nn.BatchNorm2d", "nn.BatchNorm1d", "F.batch_norm"],
    ["torch.mm", "torch.bmm", "torch.matmul", "__matmul__"],
    ["LlamaRMSNorm", "nn.RMSNorm", "F.rms_norm", "HYV4UnweightedRMSNorm"],
    ["x.__radd__", "torch.add", "x.add_", "__iadd__"],
])
def test_spellings_share_one_name(spellings: list[str]) -> None:
    assert len({canonical_name(s) for s in spellings}) == 1, {s: canonical_name(s) for s in spellings}


def test_layout_calls_and_creation_are_not_operators() -> None:
    for name in ("x.view", "torch.flatten", "x.contiguous", "x.permute", "torch.zeros_like", "torch.randn"):
        assert canonical_name(name) is None


def test_containers_helpers_and_loops_are_resolved() -> None:
    source = HEAD + '''
class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)
        self.bn = nn.BatchNorm2d(c)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)))


class Model(nn.Module):
    def __init__(self, c, n):
        super().__init__()
        layers = []
        for _ in range(n):
            layers.append(Block(c))
        self.features = nn.Sequential(*layers)
        self.heads = nn.ModuleList([nn.Linear(c, c) for _ in range(2)])
        self.pool = nn.AdaptiveAvgPool2d((1, 1))

    def _project(self, x):
        return torch.tanh(x)

    def forward(self, x):
        x = self.features(x)
        x = self.pool(x).view(x.size(0), -1)
        for head in self.heads:
            x = head(x)
        return self._project(x)
'''
    assert op_form(source).ops == ("conv2d", "batchnorm", "relu", "adaptiveavgpool2d", "linear", "tanh")


def test_eval_set_takes_a_path(tmp_path: Path) -> None:
    """The evaluation set is read from a path given by the caller (a KernelBench-like tree here)."""
    for name, source in EVAL.items():
        level, file = name.split("/")
        (tmp_path / level).mkdir(exist_ok=True)
        (tmp_path / level / f"{file}.py").write_text(source)
    evals = EvalSet([str(tmp_path)])
    assert len(evals.canonical) == len(EVAL)
    got = evals.canonical.check(op_form(GENERATED["ReLU as an nn.ReLU module"][0]))
    assert got.verdict == SAME_OPS and got.name.endswith("19_ReLU")


def test_set_report_names_the_nearest_task_of_every_row(tmp_path: Path) -> None:
    import json

    from cuda_agent.data.set_report import dataset_report

    evals = tmp_path / "eval" / "level1"
    evals.mkdir(parents=True)
    for name, source in EVAL.items():
        (evals / f"{name.split('/')[1]}.py").write_text(source)
    rows = [{"ops": "['torch.nn.ReLU']", "data_source": "torch#1", "code": GENERATED["ReLU as an nn.ReLU module"][0],
             "name": "gen-relu", "runtime_ms": 2.5, "input_shapes": "[[16, 16384]]"},
            {"ops": "['torch.nn.Linear', 'torch.nn.functional.gelu']", "data_source": "torch#2",
             "code": NOT_CONTAMINATED["Linear then GELU"], "name": "gen-lin-gelu", "runtime_ms": 4.0,
             "input_shapes": "[[16, 16384]]"}]
    table = tmp_path / "tasks.jsonl"
    table.write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = dataset_report(table, tmp_path / "out", eval_sets=[str(tmp_path / "eval")], sample=2)
    nearest = [json.loads(line) for line in (tmp_path / "out" / "nearest_eval.jsonl").read_text().splitlines()]
    assert [n["name"] for n in nearest] == ["gen-relu", "gen-lin-gelu"]
    assert nearest[0]["nearest_eval"].endswith("19_ReLU") and nearest[0]["eval_verdict"] == SAME_OPS
    assert nearest[1]["eval_verdict"] == "" and nearest[1]["eval_score"] < 1.0
    text = report.read_text()
    assert "| 2 | 1 | 50.0% | 83.8% |" in text  # composition beside Ops-6K's published mix
    assert "| same_ops | 1 |" in text and "gen-lin-gelu" in text and "```python" in text


def test_op_sequences_remember_the_first_task_with_each_sequence():
    from cuda_agent.data.canonical import OpForm, OpSequences, canonical_form

    seen = OpSequences()
    a, b = OpForm.of(["torch.relu", "torch.add"]), OpForm.of(["torch.add", "torch.relu"])
    assert seen.first(a) is None
    seen.add("t1", a)
    seen.add("t2", a)
    assert seen.first(a) == "t1" and seen.first(b) is None
    seen.add("t0", OpForm.of(()))
    assert seen.first(OpForm.of(())) is None and seen.first(None) is None
    assert canonical_form("def (:") is None
