"""The build as an attack surface (issue 24, class 3): hostile workspaces against the build on
the CPU backend, and nvcc-side checks that need only compilation. Each case names the rule it
holds; docs/guards.md ("The build") lists them."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from cuda_agent.backends import get_backend
from cuda_agent.languages import get_language
from cuda_agent.languages.cpp.build import build_workspace, publish_library

from tests.conftest import RELU_BINDING, RELU_KERNEL

pytestmark = pytest.mark.slow

BODY = "for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;\n"
ZEROS = "for (int64_t i = 0; i < n; ++i) y[i] = 0.f;\n"
KERNEL_WITH = '''#include <cstdint>
extern "C" void relu_kernel(const float* x, float* y, int64_t n) {{
#include "{name}"
}}
'''


# ---- the key covers every file the compiler reads --------------------------------------
@pytest.mark.parametrize("name", ["impl.inc", "impl.txt", "impl", "sub/impl.h"])
def test_an_included_file_of_any_name_is_in_the_cache_key(make_workspace, cache_dir, name):
    ws = make_workspace(kernels={"relu.cpp": KERNEL_WITH.format(name=name), "relu_binding.cpp": RELU_BINDING})
    (ws.root / "kernels" / name).parent.mkdir(parents=True, exist_ok=True)
    (ws.root / "kernels" / name).write_text(BODY)
    be = get_backend("cpu")
    first = build_workspace(ws.root, be, cache_dir=cache_dir)
    assert first.ok, first.log
    (ws.root / "kernels" / name).write_text(ZEROS)
    second = build_workspace(ws.root, be, cache_dir=cache_dir)
    assert second.ok, second.log
    assert second.compiled_units >= 1 and second.library != first.library, "an edit the compiler reads was not rebuilt"


# ---- nothing of the host reaches the build ------------------------------------------------
def _secret(tmp_path: Path) -> tuple[Path, str]:
    token = f"HOSTSECRET{os.getpid()}x{time.time_ns()}"
    path = tmp_path / "outside" / "secret.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{token} = 1;\n")
    return path, token


def test_an_absolute_include_of_a_host_file_never_reaches_the_log(make_workspace, cache_dir, tmp_path):
    secret, token = _secret(tmp_path)
    ws = make_workspace(kernels={"relu.cpp": f'#include "{secret}"\n' + RELU_KERNEL, "relu_binding.cpp": RELU_BINDING})
    res = build_workspace(ws.root, get_backend("cpu"), cache_dir=cache_dir)
    assert not res.ok and token not in res.log, res.log


def test_a_toolchain_file_the_compiler_may_read_never_reaches_the_log(make_workspace, cache_dir):
    """The venv is readable to the confined compiler (it is the toolchain); with the static
    checks off (`build_workspace` runs none), including its pyvenv.cfg put the file's lines into
    the log. The log says where the errors are, not what the file holds."""
    import sys

    cfg = Path(sys.prefix) / "pyvenv.cfg"
    if not cfg.is_file():
        pytest.skip("not in a venv")
    ws = make_workspace(kernels={"relu.cpp": f'#include "{cfg}"\n' + RELU_KERNEL, "relu_binding.cpp": RELU_BINDING})
    res = build_workspace(ws.root, get_backend("cpu"), cache_dir=cache_dir)
    assert not res.ok and f"{cfg}:1:" in res.log, res.log
    for line in cfg.read_text().splitlines():
        key = line.split("=")[0].strip()
        assert line.strip() not in res.log and (len(key) < 4 or key not in res.log), res.log


def test_an_assembler_include_smuggled_in_a_section_name_never_reaches_the_log(make_workspace, cache_dir, tmp_path):
    secret, token = _secret(tmp_path)
    smuggle = (f'__attribute__((section(".text\\n.include \\"{secret}\\"\\n#"))) int smuggled(void) {{ return 1; }}\n')
    ws = make_workspace(kernels={"relu.cpp": RELU_KERNEL + smuggle, "relu_binding.cpp": RELU_BINDING})
    res = build_workspace(ws.root, get_backend("cpu"), cache_dir=cache_dir)
    assert not res.ok and token not in res.log, res.log


def test_include_of_dev_zero_fails_at_once_without_eating_memory(make_workspace, cache_dir):
    ws = make_workspace(kernels={"relu.cpp": '#include "/dev/zero"\n' + RELU_KERNEL, "relu_binding.cpp": RELU_BINDING})
    t0 = time.monotonic()
    res = build_workspace(ws.root, get_backend("cpu"), cache_dir=cache_dir, timeout_s=60)
    assert not res.ok and not res.timed_out and time.monotonic() - t0 < 30, res.log
    assert "Permission denied" in res.log, res.log  # never opened, so never read into memory


def test_a_fifo_in_kernels_is_refused_not_waited_on(make_workspace, cache_dir):
    ws = make_workspace(kernels={"relu.cpp": KERNEL_WITH.format(name="body.h"), "relu_binding.cpp": RELU_BINDING})
    os.mkfifo(ws.root / "kernels" / "body.h")
    res = build_workspace(ws.root, get_backend("cpu"), cache_dir=cache_dir, timeout_s=20)
    assert not res.ok and not res.timed_out and "kernels/body.h" in res.log, res.log
    found = get_language("cpp").check(ws.root, "cpu", cache_dir=cache_dir)
    assert [f.rule for f in found] == ["workspace-file"], found


# ---- the scan and the build see one program ------------------------------------------------
def _has_syscall_instruction(library: str) -> bool:
    out = subprocess.run(["objdump", "-d", library], capture_output=True, text=True, timeout=60).stdout
    return any(line.split("\t")[-1].strip().startswith("syscall") for line in out.splitlines())


@pytest.mark.skipif(shutil.which("objdump") is None, reason="needs objdump")
def test_has_include_cannot_show_the_scan_one_program_and_build_another(make_workspace, cache_dir):
    # the scan ran in the workspace, the build elsewhere: /proc/self/cwd named different places
    probe = '''
#if __has_include("/proc/self/cwd/kernels/relu_binding.cpp")
extern "C" int probe(void) { return 0; }
#else
extern "C" long probe(void) { long r; asm volatile("syscall" : "=a"(r) : "a"(39L) : "rcx", "r11", "memory"); return r; }
#endif
'''
    ws = make_workspace(kernels={"relu.cpp": RELU_KERNEL + probe, "relu_binding.cpp": RELU_BINDING})
    lang, be = get_language("cpp"), get_backend("cpu")
    found = lang.check(ws.root, "cpu", cache_dir=cache_dir)
    if found:
        assert "raw-syscall" in {f.rule for f in found}, found
        return
    res = lang.build(ws.root, be, cache_dir=cache_dir, timeout_s=120)
    if res.ok:  # (confined, the probe is unreadable to both: both stop there)
        assert not _has_syscall_instruction(res.library), "the build compiled a branch the scan never saw"


def test_the_build_compiles_only_what_the_check_read(make_workspace, cache_dir):
    ws = make_workspace()
    lang, be = get_language("cpp"), get_backend("cpu")
    assert lang.check(ws.root, "cpu", cache_dir=cache_dir) == []
    (ws.root / "kernels" / "relu.cpp").write_text(RELU_KERNEL.replace("x[i] > 0.f ? x[i] : 0.f", "0.f"))
    res = lang.build(ws.root, be, cache_dir=cache_dir, timeout_s=120)
    assert not res.ok and "changed after the static checks" in res.log, res.log
    assert lang.build(ws.root, be, cache_dir=cache_dir, timeout_s=120).ok  # no check this time: builds as it is


# ---- the cache stays bounded -------------------------------------------------------------
def test_the_build_cache_is_pruned_to_its_bound(make_workspace, cache_dir, tmp_path, monkeypatch):
    cache = tmp_path / "bounded-cache"
    shutil.copytree(cache_dir / "pch", cache / "pch") if (cache_dir / "pch").is_dir() else None
    monkeypatch.setenv("CUDA_AGENT_BUILD_CACHE_MB", "6")
    monkeypatch.setenv("CUDA_AGENT_BUILD_CACHE_MIN_AGE_S", "0")
    be = get_backend("cpu")
    big = 'extern "C" const char big_{i}[4 << 20] = {{1}};\n'
    libs = []
    for i in range(3):
        ws = make_workspace(kernels={"relu.cpp": RELU_KERNEL + big.format(i=i), "relu_binding.cpp": RELU_BINDING},
                            name=f"big{i}")
        res = build_workspace(ws.root, be, cache_dir=cache)
        assert res.ok, res.log
        libs.append(Path(res.library))
    size = sum(p.stat().st_size for sub in ("objects", "libraries", "sources") for p in (cache / sub).rglob("*")
               if p.is_file() and not p.is_symlink())
    assert size < 3 * (4 << 20), f"{size >> 20} MiB kept for a 6 MiB bound"
    assert libs[-1].exists() and not libs[0].exists()


# ---- nothing is written through a path the candidate controls -------------------------------
def test_publishing_never_writes_through_a_link(make_workspace, cache_dir, tmp_path):
    ws = make_workspace()
    res = build_workspace(ws.root, get_backend("cpu"), cache_dir=cache_dir)
    assert res.ok, res.log
    outside = tmp_path / "outside-dir"
    outside.mkdir()
    shutil.rmtree(ws.root / "build", ignore_errors=True)
    (ws.root / "build").symlink_to(outside)
    get_language("cpp").publish(ws.root, get_backend("cpu"), res.library)
    assert list(outside.iterdir()) == [], "the evaluator wrote through build/ -> outside the workspace"
    (ws.root / "build").unlink()
    (ws.root / "build").mkdir()
    victim = tmp_path / "victim.so"
    victim.write_text("keep me")
    (ws.root / "build" / "cpu_extension.so").symlink_to(victim)
    publish_library(res.library, ws.root / "build" / "cpu_extension.so")
    assert victim.read_text() == "keep me"
    assert not (ws.root / "build" / "cpu_extension.so").is_symlink()  # replaced by the real copy


# ---- nvcc: compilation only ---------------------------------------------------------------
NVCC = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")


def _compile_cuda_kernel(ws_root: Path, cache: Path):
    """The build's own compile of each .cu unit (no PCH, no binding: nvcc only)."""
    import tempfile

    from cuda_agent.languages.cpp import TEMPLATES_DIR
    from cuda_agent.languages.cpp.build import BuildError, Layout, _plan_units, run_confined, unit_command
    from cuda_agent.languages.snapshot import take_snapshot

    be = get_backend("cuda")
    snap = take_snapshot(ws_root, cache, TEMPLATES_DIR)
    unit = next(u for u in _plan_units(snap, be, Layout(), strict=False) if u.kind == "kernel")
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        obj = Path(tmp) / "k.o"
        try:
            run_confined(unit_command(unit, be, Layout(), None, snap, obj)[0], time.monotonic() + 300, snap,
                         Path(tmp), reads=list(unit.reads))
        except BuildError as exc:
            return False, exc.log
        return obj.stat().st_size > 0, ""


@NVCC
def test_nvcc_compiles_an_honest_kernel_confined(tmp_path, cache_dir):
    from cuda_agent.examples import get_example

    ws = tmp_path / "ws"
    shutil.copytree(get_example("softmax").solution_dir("cuda") / "kernels", ws / "kernels")
    ok, log = _compile_cuda_kernel(ws, cache_dir)
    assert ok, log


@NVCC
@pytest.mark.parametrize("how", ["include", "asm-include"])
def test_nvcc_never_puts_a_host_file_into_the_log(tmp_path, cache_dir, how):
    secret, token = _secret(tmp_path)
    src = ('#include <cuda_runtime.h>\n__global__ void k(float* y) { y[0] = 1.f; }\n'
           'extern "C" void launch(float* y, cudaStream_t s) { k<<<1, 1, 0, s>>>(y); }\n')
    if how == "include":
        src = f'#include "{secret}"\n' + src
    else:
        src += f'__attribute__((section(".text\\n.include \\"{secret}\\"\\n#"))) int smuggled(void) {{ return 1; }}\n'
    ws = tmp_path / "ws"
    (ws / "kernels").mkdir(parents=True)
    (ws / "kernels" / "k.cu").write_text(src)
    ok, log = _compile_cuda_kernel(ws, cache_dir)
    assert not ok and token not in log, log


# ---- what reaches the assembler -------------------------------------------------------------
SECTION_LEAK = r'''
#include <cstdint>
#define LEAK(n, path) \
  __attribute__((used, section(".rodata.lk" #n "\n.globl lkd" #n "\nlkd" #n ":\n.INCBIN \"" path "\"\n.BYTE 0\n#"))) \
  const char lkpad##n[1] = {0};
LEAK(0, "/etc/hostname")
extern "C" const char lkd0[];
extern "C" const char* leak_text() { return lkd0; }
'''


def test_a_section_name_cannot_carry_assembler_directives(make_workspace, cache_dir):
    """Round 4: a newline in a section attribute's name (built by the preprocessor, so only the
    preprocessed scan sees it whole) put `.INCBIN "<host file>"` into the assembler's input, in
    upper case past a case-sensitive `.incbin` rule, and the file's bytes reached the reason."""
    ws = make_workspace(kernels={"relu.cpp": RELU_KERNEL + SECTION_LEAK, "relu_binding.cpp": RELU_BINDING})
    found = get_language("cpp").check(ws.root, "cpu", cache_dir=cache_dir)
    assert any(f.rule == "inline-asm" and "section name" in f.message for f in found), found
    plain = '__attribute__((used, section(".rodata.mine"))) const char tag[4] = "abc";\n'
    ws = make_workspace(kernels={"relu.cpp": RELU_KERNEL + plain, "relu_binding.cpp": RELU_BINDING}, name="plain")
    assert not get_language("cpp").check(ws.root, "cpu", cache_dir=cache_dir)  # a plain name is fine


# ---- what the build may cost ---------------------------------------------------------------
def _macro_bomb(levels: int, in_if: bool = False) -> str:
    """A macro chain whose expansion doubles per level: 2^levels terms of `1+` (round 5, k1)."""
    lines = ["#define X0 1+", *(f"#define X{i} X{i - 1} X{i - 1}" for i in range(1, levels + 1))]
    lines += [f"#if X{levels} 0", "#endif"] if in_if else [f'extern "C" int64_t bomb() {{ return X{levels} 0; }}']
    return RELU_KERNEL + "\n".join(lines) + "\n"


def test_a_macro_bomb_is_refused_by_the_scan_not_built(make_workspace, fast_config):
    """Round 5, k1: 2^20 terms passed the scan (a few MiB) and spent the build's 300 s limit; g++
    is quadratic in such an expression (2^14 terms 17 s, 2^16 over 200 s on the 2-core box).
    2^16 terms expand to 200 KiB from one line: refused by the scan, the build never runs."""
    from cuda_agent.evaluation import evaluate

    ws = make_workspace(kernels={"relu.cpp": _macro_bomb(16), "relu_binding.cpp": RELU_BINDING})
    t0 = time.monotonic()
    res = evaluate(ws, fast_config.model_copy(update={"measure": False}))
    assert res.reward == -1 and res.stage == "guard" and "[preprocess-bound]" in res.reason, res.reason
    assert "kernels/relu.cpp" in res.reason and time.monotonic() - t0 < 60, res.reason


def test_a_long_line_of_literal_data_is_not_a_bomb(make_workspace, cache_dir):
    table = "static const float table[] = {" + ",".join(f"{i % 97}.5f" for i in range(40000)) + "};\n"
    ws = make_workspace(kernels={"relu.cpp": RELU_KERNEL + table, "relu_binding.cpp": RELU_BINDING})
    assert get_language("cpp").check(ws.root, "cpu", cache_dir=cache_dir) == []


def test_the_scan_bounds_its_output_memory_and_time(make_workspace, cache_dir, monkeypatch):
    """Past any bound the scan gives a verdict at once, rather than the build's whole limit
    later (bounds lowered here so the test is fast; the defaults are far above honest code)."""
    from cuda_agent.languages.cpp import source_rules

    lang = get_language("cpp")
    monkeypatch.setattr(source_rules, "SCAN_OUTPUT_BYTES", 256 << 10)
    ws = make_workspace(kernels={"relu.cpp": _macro_bomb(18), "relu_binding.cpp": RELU_BINDING}, name="big")
    found = lang.check(ws.root, "cpu", cache_dir=cache_dir)
    assert any(f.rule == "preprocess-bound" and "expands past" in f.message for f in found), found
    monkeypatch.undo()
    monkeypatch.setattr(source_rules, "SCAN_MEMORY_BYTES", 512 << 20)  # cpp holds a line's expansion whole
    ws = make_workspace(kernels={"relu.cpp": _macro_bomb(22), "relu_binding.cpp": RELU_BINDING}, name="deep")
    found = lang.check(ws.root, "cpu", cache_dir=cache_dir)
    assert any(f.file == "kernels/relu.cpp" and f.rule == "preprocess-bound" and "memory" in f.message
               for f in found), found
    monkeypatch.undo()
    monkeypatch.setattr(source_rules, "SCAN_TIME_S", 1.0)
    ws = make_workspace(kernels={"relu.cpp": _macro_bomb(22, in_if=True), "relu_binding.cpp": RELU_BINDING},
                        name="slow")  # no output at all: 2^22 terms evaluated by #if, ~2 s
    t0 = time.monotonic()
    found = lang.check(ws.root, "cpu", cache_dir=cache_dir)
    assert any(f.file == "kernels/relu.cpp" and f.rule == "preprocess-bound" and "took over" in f.message
               for f in found), found
    assert time.monotonic() - t0 < 30
