"""The language registry: every registered language resolves to its class, and the artifact (not the
workspace) tells the candidate how to load."""

from __future__ import annotations

import importlib

import pytest

from cuda_agent.languages import LANGUAGE_NAMES, Language, get_language, language_for_artifact
from cuda_agent.languages.base import _REGISTRY


def test_every_registered_language_points_at_its_class() -> None:
    """The registry names modules in strings (imported on first use): each must still point at a
    `Language` of that name, or a moved module would only fail when its language is asked for."""
    assert set(_REGISTRY) == set(LANGUAGE_NAMES)
    for name, target in _REGISTRY.items():
        module, _, cls = target.partition(":")
        found = getattr(importlib.import_module(module), cls, None)
        assert isinstance(found, type) and issubclass(found, Language) and found.name == name, target
        assert type(get_language(name)) is found


def test_registry_names_and_artifacts() -> None:
    assert {"cpp", "triton", "paper"} <= set(LANGUAGE_NAMES)
    assert language_for_artifact("/c/libraries/ab/cuda_extension.so").name == "cpp"
    assert language_for_artifact("/c/libraries/ab/cuda_extension.pyext.so").name == "paper"
    assert language_for_artifact("/c/triton/ab/manifest.triton.json").name == "triton"
    with pytest.raises(ValueError):
        language_for_artifact("/workspace/kernels/evil.py")
    with pytest.raises(ValueError):
        get_language("fortran")
