"""The places a language writes outside scratch, known before the candidate knows its language:
the early write confinement allows them, and the language's own sandbox needs name the same."""

from __future__ import annotations

from cuda_agent.languages import get_language
from cuda_agent.languages.base import shared_writable_paths


def test_a_shared_triton_cache_is_allowed_early_and_by_the_language(tmp_path, monkeypatch):
    assert shared_writable_paths() == []
    shared = tmp_path / "triton-cache"
    monkeypatch.setenv("CUDA_AGENT_TRITON_CACHE_DIR", str(shared))
    assert shared_writable_paths() == [shared] and shared.is_dir()
    needs = get_language("triton").sandbox_needs(tmp_path / "scratch")
    assert list(needs.writable) == [shared] and needs.environment["TRITON_CACHE_DIR"] == str(shared)
