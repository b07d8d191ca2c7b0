"""Bad input to `cuda-agent train rft|rl` (issue 26): a config key that does not exist, a model
path that is not a model, a dataset row that truncation empties. Each is one `error:` line naming
the key, file or row and the fix, exit 2, before any weights load; and the shipped tiny RFT config
trains on the project's own demo rows."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from cuda_agent.cli import app

pytest.importorskip("trl")

CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "train"
runner = CliRunner()


def _train(*args: str):
    return runner.invoke(app, ["train", *args])


def _error_line(result) -> str:
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1, result.output  # one line, no traceback
    assert lines[0].startswith("error: ")
    return lines[0]


def test_unknown_config_key_names_the_key_its_source_and_the_near_miss(tmp_path):
    r = _train("rl", "-c", str(CONFIGS / "rl_tiny_cpu.yaml"), "--set", "generation.max_new_token=64")
    assert r.exit_code == 2
    line = _error_line(r)
    assert "--set generation.max_new_token: no such key in RLConfig.generation" in line
    assert "did you mean max_new_tokens?" in line
    bad = tmp_path / "rl.yaml"
    bad.write_text((CONFIGS / "rl_tiny_cpu.yaml").read_text() + "num_generation: 4\n")
    r = _train("rl", "-c", str(bad))
    assert r.exit_code == 2
    line = _error_line(r)
    assert f"{bad}: num_generation: no such key in RLConfig; did you mean num_generations" in line


@pytest.mark.parametrize("kind", ["missing", "empty folder", "not gguf", "no tokenizer"])
def test_model_path_that_is_not_a_model_fails_before_loading(tmp_path, kind, monkeypatch):
    import cuda_agent.train.models as models

    def no_loading(*a, **k):
        raise AssertionError("weights were loaded for a path that is not a model")

    monkeypatch.setattr(models, "load_model", no_loading)
    path = tmp_path / "model"
    if kind == "empty folder":
        path.mkdir()
    elif kind == "not gguf":
        path = tmp_path / "model.bin"
        path.write_bytes(b"\0" * 16)
    elif kind == "no tokenizer":
        path.mkdir()
        (path / "config.json").write_text("{}")
    want = {"missing": "does not exist", "empty folder": "without config.json", "not gguf": "not a .gguf",
            "no tokenizer": "no tokenizer files"}[kind]
    r = _train("rl", "-c", str(CONFIGS / "rl_tiny_cpu.yaml"), "--set", f"model.path={path}",
               "--set", f"output_dir={tmp_path / 'out'}")
    assert r.exit_code == 2, r.output
    assert not (tmp_path / "out").exists()  # nothing written for a run that cannot start
    line = _error_line(r)
    assert f"model.path {path}" in line and want in line, line
    assert "give a Hugging Face folder" in line or "tokenizer.save_pretrained" in line  # the fix


def _demo_rows(tmp_path) -> Path:
    out = tmp_path / "demos.jsonl"
    r = _train("demos", "examples:swish", "examples:softmax", "-o", str(out), "--backend", "cpu")
    assert r.exit_code == 0, r.output
    return out


def test_row_emptied_by_truncation_is_named_with_the_max_length_that_keeps_it(tmp_path, monkeypatch):
    import cuda_agent.train.models as models

    monkeypatch.setattr(models, "load_model", lambda *a, **k: pytest.fail("weights loaded before the rows were checked"))
    rows = _demo_rows(tmp_path)
    r = _train("rft", "-c", str(CONFIGS / "rft_tiny_cpu.yaml"), "--set", f"dataset={rows}",
               "--set", "max_length=1024", "--set", f"output_dir={tmp_path / 'rft'}")
    assert r.exit_code == 2, r.output
    line = _error_line(r)
    assert f"dataset {rows} row 1 (task examples/swish" in line
    assert "truncation to max_length=1024 leaves no assistant tokens" in line and "(and 1 more rows)" in line
    need = int(line.rsplit("--set max_length=", 1)[1].split(")")[0])
    assert need > 1024


def test_shipped_tiny_rft_config_keeps_every_demo_row(tmp_path):
    """The smoke config on the project's own demo rows: every row keeps assistant tokens (it failed
    with 'conversation has no assistant tokens to learn from' at max_length 4096)."""
    from cuda_agent.train.config import RFTConfig, load_config
    from cuda_agent.train.models import load_tokenizer
    from cuda_agent.train.trl.sft import encode_rows

    cfg = load_config(RFTConfig, CONFIGS / "rft_tiny_cpu.yaml", [f"dataset={_demo_rows(tmp_path)}"])
    encoded = encode_rows(cfg, load_tokenizer(cfg.model))
    assert len(encoded) == 2 and all(sum(e["assistant_masks"]) > 100 for e in encoded)
