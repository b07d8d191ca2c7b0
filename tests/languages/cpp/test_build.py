"""The build: content-addressed cache, per-file flags, trimmed errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.backends import get_backend
from cuda_agent.languages.cpp.build import build_workspace, trim_compiler_output

from tests.conftest import RELU_BINDING, RELU_KERNEL

pytestmark = pytest.mark.slow


def test_unchanged_sources_cost_nothing_and_one_edit_rebuilds_one_unit(make_workspace, cache_dir):
    ws = make_workspace()
    be = get_backend("cpu")
    first = build_workspace(ws.root, be, cache_dir=cache_dir)
    assert first.ok, first.log
    again = build_workspace(ws.root, be, cache_dir=cache_dir)
    assert again.ok and again.compiled_units == 0 and again.library == first.library
    assert again.seconds < 1.0
    (ws.root / "kernels" / "relu.cpp").write_text(RELU_KERNEL + "\n// edited\n")
    edited = build_workspace(ws.root, be, cache_dir=cache_dir)
    assert edited.ok and edited.compiled_units == 1 and edited.library != first.library


def test_flags_off_the_allow_list_are_refused(make_workspace, cache_dir):
    ws = make_workspace(kernels={"relu.cpp": "// @flags: -fplugin=evil.so\n" + RELU_KERNEL,
                                 "relu_binding.cpp": RELU_BINDING})
    res = build_workspace(ws.root, get_backend("cpu"), cache_dir=cache_dir)
    assert not res.ok and "not allowed" in res.log


def test_missing_binding_is_explained(make_workspace, cache_dir):
    ws = make_workspace(kernels={"relu.cpp": RELU_KERNEL})
    res = build_workspace(ws.root, get_backend("cpu"), cache_dir=cache_dir)
    assert not res.ok and "_binding.cpp" in res.log


def test_build_timeout(make_workspace, cache_dir):
    heavy = RELU_KERNEL + "\n#include <regex>\nstatic std::regex r(\"a+\");\n"
    ws = make_workspace(kernels={"relu.cpp": heavy, "relu_binding.cpp": RELU_BINDING})
    res = build_workspace(ws.root, get_backend("cpu"), cache_dir=cache_dir, timeout_s=0.05)
    assert not res.ok and res.timed_out and "timed out" in res.log


def test_trim_keeps_errors_and_drops_template_noise():
    ws = Path("/work/ws")
    raw = "\n".join([
        "In file included from /usr/include/c++/12/vector:64,",
        "                 from /work/ws/kernels/a.cpp:1:",
        "/work/ws/kernels/a.cpp: In function 'void f()':",
        "/work/ws/kernels/a.cpp:3:5: error: 'foo' was not declared in this scope",
        "    3 |     foo();",
        "      |     ^~~",
        "/usr/include/x.h:10:1: note: candidate: template<class T> void g(T)",
        *[f"/usr/include/x.h:{i}:1:   required from here" for i in range(200)],
    ])
    out = trim_compiler_output(raw, ws)
    assert "kernels/a.cpp:3:5: error: 'foo' was not declared" in out
    assert "foo();" in out
    assert "required from" not in out and "/work/ws/" not in out
    assert len(out.splitlines()) <= 10


def test_trim_never_quotes_a_file_outside_the_workspace():
    """Issue 24: a file outside the workspace that the compiler may read (a toolchain file) keeps
    its place and message in the log, never its bytes: no source line, no quoted token, no
    `#error` text. The workspace's own lines are quoted as before."""
    ws = Path("/work/ws")
    raw = "\n".join([
        "/venv/pyvenv.cfg:1:30: error: too many decimal points in number",
        "    1 | home = /root/.pyenv/versions/3.11.7/bin",
        "      |                              ^~~~~~",
        "/venv/pyvenv.cfg:1:1: error: \u2018home\u2019 does not name a type",
        "    1 | home = /root/.pyenv/versions/3.11.7/bin",
        "/venv/secret.h(2): error: identifier \"SECRETWORD\" is undefined",
        "  int x = SECRETWORD;",
        "          ^",
        "/venv/other.h:3:2: error: #error SECRETTEXT here",
        "/work/ws/kernels/a.cpp:3:5: error: 'foo' was not declared in this scope",
        "    3 |     foo();",
    ])
    out = trim_compiler_output(raw, ws)
    for leaked in ("home", "pyenv", "SECRETWORD", "SECRETTEXT"):
        assert leaked not in out, out
    assert "/venv/pyvenv.cfg:1:30: error: too many decimal points in number" in out
    assert "/venv/secret.h(2): error: identifier '…' is undefined" in out
    assert "kernels/a.cpp:3:5: error: 'foo' was not declared" in out and "foo();" in out


def test_the_link_reads_its_own_pins_of_the_cached_objects(make_workspace, cache_dir, monkeypatch):
    """Issue 23, seventh session: a read rule of the link's sandbox binds to a file's inode, and a
    concurrent build of identical sources replaced a cached object's name with a new inode between
    the rule and the linker's open: "ld returned 1" for an honest reference solution (1 in 12 of four
    concurrent builds). The linker now reads hard links made in its own scratch, pinned to the
    objects as they were, whatever happens to the cache's names after."""
    import os

    from cuda_agent.languages.cpp import build as build_module

    seen: list[tuple[list[Path], Path]] = []
    real = build_module.run_confined

    def recording(cmd, deadline, snap, scratch, *, reads, **kw):
        if any(str(a).endswith(".so") for a in cmd):  # the link
            seen.append((list(reads), scratch))
            for o in (Path(cache_dir).resolve() / "objects").glob("*.o"):  # each cache name now another
                # inode, as a concurrent build of the same unit leaves it
                fresh = o.with_suffix(".fresh")
                fresh.write_bytes(o.read_bytes())
                os.replace(fresh, o)
        return real(cmd, deadline, snap, scratch, reads=reads, **kw)

    monkeypatch.setattr(build_module, "run_confined", recording)
    ws = make_workspace(kernels={"relu.cpp": RELU_KERNEL + "\n// linked anew\n", "relu_binding.cpp": RELU_BINDING})
    res = build_workspace(ws.root, get_backend("cpu"), cache_dir=cache_dir)
    assert res.ok, res.log
    assert seen and all(r.is_relative_to(scratch) for reads, scratch in seen for r in reads)
