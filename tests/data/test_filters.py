"""Each execution filter rejects a crafted bad task with the right reason, in the isolated data
worker; a good task passes them all; a hanging or crashing task costs only its worker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cuda_agent.data import device_lock
from cuda_agent.data.config import FilterConfig
from cuda_agent.data.filters import Reason, TaskCheck
from cuda_agent.data.data_worker import DataWorker, WorkerDied

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"

GOOD = HEADER + '''
class Model(nn.Module):
    def __init__(self, features, width):
        super().__init__()
        self.linear = nn.Linear(features, width)

    def forward(self, x):
        return torch.relu(self.linear(x))

def get_inputs():
    return [torch.randn(8, 64)]

def get_init_inputs():
    return [64, 32]
'''

BAD = {
    Reason.STOCHASTIC: GOOD.replace("return torch.relu(self.linear(x))",
                                    "return F.dropout(self.linear(x), p=0.5, training=True)"),
    Reason.NONDETERMINISTIC: GOOD.replace("class Model", "CALLS = [0]\n\nclass Model").replace(
        "return torch.relu(self.linear(x))", "CALLS[0] += 1\n        return torch.relu(self.linear(x)) * CALLS[0]"),
    Reason.CONSTANT_OUTPUT: GOOD.replace("return torch.relu(self.linear(x))", "return self.linear(x) * 0 + 1"),
    Reason.NON_FINITE: GOOD.replace("return torch.relu(self.linear(x))", "return torch.log(self.linear(x) - 100)"),
    Reason.FIXED_INPUTS: GOOD.replace("torch.randn(8, 64)", "torch.ones(8, 64)"),
    Reason.INPUT_INSENSITIVE: GOOD.replace("def forward(self, x):", "def forward(self, x, unused):").replace(
        "[torch.randn(8, 64)]", "[torch.randn(8, 64), torch.randn(8, 64)]"),
    Reason.UNUSED_PARAMETER: GOOD.replace("self.linear = nn.Linear(features, width)",
                                          "self.linear = nn.Linear(features, width)\n"
                                          "        self.scale = nn.Parameter(torch.ones(width))"),
    Reason.TOO_SLOW: GOOD.replace("import torch\n", "import time\nimport torch\n", 1).replace(
        "return torch.relu(self.linear(x))", "time.sleep(0.15)\n        return torch.relu(self.linear(x))"),
    Reason.COMPILE_MISMATCH: GOOD.replace(
        "return torch.relu(self.linear(x))",
        "y = torch.relu(self.linear(x))\n        return y + 1 if torch.compiler.is_compiling() else y"),
    Reason.RUNTIME_ERROR: GOOD.replace("return [64, 32]", "return [32, 32]"),
    Reason.LOAD_ERROR: GOOD.replace("def get_inputs", "def make_inputs"),
}

# wide enough that a loaded 2-core box never calls the good task slow; TOO_SLOW sleeps past it
WINDOW = (0.0, 120.0)


@pytest.fixture(scope="module")
def worker() -> Iterator[DataWorker]:
    with DataWorker("cpu", threads=1) as w:
        yield w


def check(worker: DataWorker, source: str, **cfg) -> TaskCheck:
    filters = FilterConfig(**{"window_ms": WINDOW, "compile_backend": "eager", **cfg})
    reply = worker.request({"op": "check", "source": source, "filters": filters.model_dump(mode="json")}, 120)
    return TaskCheck.model_validate(reply["check"])


def test_good_task_passes_every_filter(worker: DataWorker) -> None:
    result = check(worker, GOOD, early_exit=False)
    assert result.ok, result.failures()
    assert [f.name for f in result.filters] == ["runs", "finite", "non_constant", "not_degenerate", "varied_inputs",
                                                "input_sensitive",
                                                "parameters_used", "deterministic", "not_stochastic", "runtime",
                                                "compile"]
    assert result.input_shapes == [[8, 64]] and result.output_shapes == [[8, 32]]
    assert result.runtime_ms is not None and result.runtime_ms > 0


@pytest.mark.parametrize("reason", sorted(BAD))
def test_bad_task_rejected_with_its_reason(worker: DataWorker, reason: str) -> None:
    window = (0.0, 100.0) if reason == Reason.TOO_SLOW else WINDOW
    result = check(worker, BAD[reason], window_ms=window)
    assert not result.ok
    assert result.reason == reason, (result.reason, result.detail)
    assert result.filters[-1].reason == reason  # early exit: the failing filter is the last one run


def test_too_fast_against_the_default_window(worker: DataWorker) -> None:
    tiny = GOOD.replace("torch.randn(8, 64)", "torch.randn(1, 64)")
    filters = FilterConfig(compile=False)  # CPU default window: 1-50 ms; this task takes microseconds
    reply = worker.request({"op": "check", "source": tiny, "filters": filters.model_dump(mode="json")}, 120)
    result = TaskCheck.model_validate(reply["check"])
    assert result.reason == Reason.TOO_FAST, result.detail


def test_audit_mode_reports_every_failure(worker: DataWorker) -> None:
    """early_exit off: a task that is both stochastic and has a dead parameter says both."""
    source = BAD[Reason.STOCHASTIC].replace("self.linear = nn.Linear(features, width)",
                                            "self.linear = nn.Linear(features, width)\n"
                                            "        self.dead = nn.Parameter(torch.ones(3))")
    result = check(worker, source, early_exit=False)
    reasons = {f.reason for f in result.failures()}
    assert {Reason.STOCHASTIC, Reason.UNUSED_PARAMETER} <= reasons


def test_hanging_task_times_out_and_only_its_worker_dies() -> None:
    hang = GOOD.replace("return torch.relu(self.linear(x))", "while True:\n            pass")
    with DataWorker("cpu", threads=1) as w:
        w.send({"op": "check", "source": hang, "filters": FilterConfig(compile=False).model_dump(mode="json")})
        with pytest.raises(WorkerDied, match="timed out"):
            w.receive(timeout_s=8)
        assert not w.alive() or w.proc.wait(timeout=10) is not None


def test_crashing_task_is_reported_as_a_crash() -> None:
    crash = GOOD.replace("import torch\n", "import ctypes\nimport torch\n", 1).replace(
        "return torch.relu(self.linear(x))", "return ctypes.string_at(0)  # a real segmentation fault")
    with DataWorker("cpu", threads=1) as w:
        with pytest.raises(WorkerDied, match="crashed"):
            w.request({"op": "check", "source": crash, "filters": FilterConfig(compile=False).model_dump(mode="json")},
                      60)


def test_filters_under_the_device_lock(worker: DataWorker, tmp_path) -> None:
    """With a lock file (several workers on one device) every step runs under it, the compiled
    output compared after a warm-up call, and the verdicts do not change."""
    lock = device_lock.create(tmp_path / "device.lock")
    good = check(worker, GOOD, gpu_lock=str(lock), quiet_timing=True)
    assert good.ok, good.detail
    assert [f.name for f in good.filters][-1] == "compile"
    bad = check(worker, BAD[Reason.COMPILE_MISMATCH], gpu_lock=str(lock), quiet_timing=True)
    assert bad.reason == Reason.COMPILE_MISMATCH
    assert (tmp_path / "device.lock.gate").exists()


def test_far_too_slow_first_call_is_cut_before_the_other_checks(worker: DataWorker) -> None:
    """A forward far past the window ends the check at once instead of ~25 more slow calls."""
    slow = BAD[Reason.TOO_SLOW].replace("time.sleep(0.15)", "time.sleep(0.7)")
    result = check(worker, slow, window_ms=(0.0, 50.0))
    assert result.reason == Reason.TOO_SLOW
    assert "first call" in result.detail and "warm call" in result.detail  # judged after a warm re-call
    assert [f.name for f in result.filters] == ["runs"]
    assert result.first_call_ms >= 700 and result.warm_call_ms >= 700


# ---- degenerate work (degenerate.py): the examples, each with its reason ----------------
def _task(init: str, forward: str, inputs: str, args: str = "x") -> str:
    init = "\n".join("        " + line for line in init.splitlines())
    forward = "\n".join("        " + line for line in forward.splitlines())
    return (HEADER + f"\nclass Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n{init}\n\n"
            f"    def forward(self, {args}):\n{forward}\n\n\ndef get_inputs():\n    return {inputs}\n\n\n"
            "def get_init_inputs():\n    return []\n")


DEGENERATE = {
    "softmax twice (module with implicit dim, then torch.special)": (
        _task("self.softmax = nn.Softmax()", "x = self.softmax(x)\nreturn torch.special.softmax(x, -1)",
              "[torch.randn(32, 256)]"), Reason.REDUNDANT_OP),
    "relu twice": (_task("self.fc = nn.Linear(256, 256)", "x = torch.relu(self.fc(x))\nreturn F.relu(x)",
                         "[torch.randn(32, 256)]"), Reason.REDUNDANT_OP),
    "relu of a softmax (identity on its domain)": (
        _task("", "return torch.relu(torch.softmax(x, -1)) + 0", "[torch.randn(32, 256)]"), Reason.REDUNDANT_OP),
    "MultiLabelSoftMarginLoss on randn targets": (
        _task("self.loss = nn.MultiLabelSoftMarginLoss()", "x = torch.cummin(x, -1)[0]\nreturn self.loss(x, target)",
              "[torch.randn(16, 8, 8, 8), torch.randn(16, 8, 8, 8)]", "x, target"), Reason.RANDOM_TARGET),
    "hfft2 -> celu -> topk -> sinc -> shifted_chebyshev_polynomial_t": (
        _task("", "x = torch.fft.hfft2(x)\nx = torch.celu(x)\nx = torch.topk(x, 2)[0]\nx = torch.sinc(x)\n"
                  "return torch.special.shifted_chebyshev_polynomial_t(x, 2)", "[torch.randn(16, 8, 32, 32)]"),
        Reason.DEGENERATE_DOMAIN),
    "attention of a 2-D tensor with itself": (
        _task("", "x = F.scaled_dot_product_attention(x, x, x)\nreturn F.pairwise_distance(x, x2)",
              "[torch.randn(128, 512), torch.randn(128, 512)]", "x, x2"), Reason.SELF_ATTENTION),
    "overflow hidden by a later clamp": (
        _task("", "return torch.clamp(torch.exp(x * 100), max=1.0)", "[torch.randn(32, 256)]"), Reason.OVERFLOW),
    "output within the check's tolerance of a constant (softmax over 65,536 values)": (
        _task("", "return torch.softmax(x, -1)", "[torch.randn(4, 65536)]"), Reason.NEAR_CONSTANT),
    "output constant to 1e-3 of its magnitude": (
        _task("self.ln = nn.LayerNorm(256)", "return torch.cos(x) * 1e-3 + 1e3", "[torch.randn(32, 256)]"),
        Reason.NEAR_CONSTANT),
}
NOT_DEGENERATE = {
    "linear -> gelu": _task("self.fc = nn.Linear(256, 128)", "return F.gelu(self.fc(x))", "[torch.randn(32, 256)]"),
    "conv -> softmax over channels": _task("self.conv = nn.Conv2d(3, 16, 3)", "return torch.softmax(self.conv(x), 1)",
                                           "[torch.randn(4, 3, 16, 16)]"),
    "BCE on targets in [0, 1]": _task("", "return F.binary_cross_entropy(torch.sigmoid(x), y)",
                                      "[torch.randn(32, 256), torch.rand(32, 256)]", "x, y"),
    "MSE on randn targets (any real target is meaningful)": _task("", "return F.mse_loss(torch.tanh(x), y)",
                                                                  "[torch.randn(32, 256), torch.randn(32, 256)]",
                                                                  "x, y"),
    "batched self-attention (3-D)": _task("self.mha = nn.MultiheadAttention(64, 4)", "return self.mha(x, x, x)[0]",
                                          "[torch.randn(16, 4, 64)]"),
}


@pytest.mark.parametrize("case", sorted(DEGENERATE))
def test_degenerate_work_rejected_with_its_reason(worker: DataWorker, case: str) -> None:
    source, reason = DEGENERATE[case]
    result = check(worker, source, compile=False)
    assert result.reason == reason, (case, result.reason, result.detail)
    assert result.filters[-1].name == "not_degenerate"


@pytest.mark.parametrize("case", sorted(NOT_DEGENERATE))
def test_sound_work_passes_the_degenerate_checks(worker: DataWorker, case: str) -> None:
    result = check(worker, NOT_DEGENERATE[case], compile=False)
    assert result.ok, (case, result.reason, result.detail)


def test_cold_first_call_is_retimed_warm_not_rejected(worker: DataWorker) -> None:
    """A first call past the cut that is fast when warm (a worker's cold start) passes; both
    times are recorded."""
    cold = GOOD.replace("import torch\n", "import time\nimport torch\n", 1).replace(
        "class Model", "COLD = [True]\n\nclass Model").replace(
        "return torch.relu(self.linear(x))",
        "if COLD[0]:\n            COLD[0] = False\n            time.sleep(0.7)\n        return torch.relu(self.linear(x))")
    result = check(worker, cold, window_ms=(0.0, 50.0), compile=False)
    assert result.ok, (result.reason, result.detail)
    assert result.first_call_ms is not None and result.first_call_ms >= 700
    assert result.warm_call_ms is not None and result.warm_call_ms < 500
