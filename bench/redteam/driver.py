"""The red team's driver (rounds 15-19 use it through their `common.py`, each with its own files: `use`): evaluate a hostile workspace and an honest control in one warm judge (CPU backend).

Every reproducer builds workspaces from a task source, a model_new.py and kernels/ files, evaluates them
with `cuda_agent.evaluation.evaluate` (all guards on unless a reproducer says otherwise), prints one line per
evaluation and appends it to results.jsonl beside this file.

The hostile C++ code needs libc calls the symbol allowlist refuses; `RESOLVER` finds them at run time by
walking libc's own ELF dynamic symbol table from the address of an allowed import (memcpy), so the library
imports nothing but allowed symbols and holds no `syscall` instruction (the sandbox is what is tested).
"""
from __future__ import annotations

import json
import shutil
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results.jsonl"

from cuda_agent.evaluation import EvalConfig, GuardConfig, evaluate  # noqa: E402
from cuda_agent.evaluation.config import TimingConfig  # noqa: E402

sys.path.insert(0, str(HERE.parents[1]))  # the honest relu the tests use, one home: tests/conftest.py
from tests.conftest import RELU_BINDING, RELU_KERNEL, RELU_MODEL_NEW, RELU_TASK, cpu_workspace  # noqa: E402,F401

# libc functions found at run time from memcpy's address: the ELF header of libc (page-aligned, below),
# its PT_DYNAMIC, then DT_SYMTAB / DT_STRTAB scanned linearly (dynsym precedes dynstr in glibc)
RESOLVER = r'''
#include <cstdint>
#include <cstring>
namespace rt {
struct Ehdr { unsigned char ident[16]; uint16_t type, machine; uint32_t version; uint64_t entry, phoff, shoff;
              uint32_t flags; uint16_t ehsize, phentsize, phnum, shentsize, shnum, shstrndx; };
struct Phdr { uint32_t type, flags; uint64_t offset, vaddr, paddr, filesz, memsz, align; };
struct Dyn { int64_t tag; uint64_t val; };
struct Sym { uint32_t name; unsigned char info, other; uint16_t shndx; uint64_t value, size; };
static uintptr_t base() {
  uintptr_t p = reinterpret_cast<uintptr_t>(&memcpy) & ~uintptr_t(4095);
  for (;; p -= 4096) { const unsigned char* c = reinterpret_cast<const unsigned char*>(p);
    if (c[0] == 0x7f && c[1] == 'E' && c[2] == 'L' && c[3] == 'F') return p; }
}
static void* find(const char* want) {
  uintptr_t b = base();
  const Ehdr* e = reinterpret_cast<const Ehdr*>(b);
  const Phdr* ph = reinterpret_cast<const Phdr*>(b + e->phoff);
  const Dyn* d = nullptr;
  for (int i = 0; i < e->phnum; ++i) if (ph[i].type == 2) d = reinterpret_cast<const Dyn*>(b + ph[i].vaddr);
  uintptr_t symtab = 0, strtab = 0;
  for (; d && d->tag; ++d) { if (d->tag == 6) symtab = d->val; if (d->tag == 5) strtab = d->val; }
  if (symtab < b) symtab += b; if (strtab < b) strtab += b;
  for (const Sym* s = reinterpret_cast<const Sym*>(symtab); reinterpret_cast<uintptr_t>(s) < strtab; ++s) {
    const char* n = reinterpret_cast<const char*>(strtab + s->name);
    if (s->value && strcmp(n, want) == 0) return reinterpret_cast<void*>(b + s->value);
  }
  return nullptr;
}
// the raw-call entry point, by a name spelled so that no scanner sees it
static long (*sc())(long, ...) {
  static const char n[] = {'s','y','s','c','a','l','l',0};
  return reinterpret_cast<long (*)(long, ...)>(find(n));
}
}  // namespace rt
'''


def config(*, fast: bool = True, compile_mode: str | None = None, guards: GuardConfig | None = None,
           **timing) -> EvalConfig:
    if compile_mode is None and (os.environ.get("RT_COMPILE") or os.environ.get(f"{_TAG.upper()}_COMPILE")):
        # RT_COMPILE=1 (or RT16_COMPILE=1 for round 16, ...): the shipped default, eager and torch.compile
        compile_mode = "default"
    t = dict(budget_s=0.5, min_trials=20, warmup_ms=5) if fast else {}
    t.update(timing)
    return EvalConfig(backend="cpu", compile_mode=compile_mode, worker_timeout_s=300, memory_limit_gb=3.0,
                      timing=TimingConfig(**t), guards=guards or GuardConfig(), cache_dir=str(CACHE))


_TAG = "rt"
_ROOT = Path(tempfile.mkdtemp(prefix="rt-ws-"))
CACHE = Path("/tmp/rt-cache")  # builds and baselines of these runs (not ~/.cache/cuda-agent); `rm -rf` it when done


def use(tag: str, folder: Path) -> None:
    """A round's own files: workspaces under /tmp/<tag>-ws-*, builds and baselines in /tmp/<tag>-cache,
    its results in `folder`/results.jsonl."""
    global _TAG, _ROOT, CACHE, RESULTS
    shutil.rmtree(_ROOT, ignore_errors=True)
    _TAG, _ROOT, CACHE = tag, Path(tempfile.mkdtemp(prefix=f"{tag}-ws-")), Path(f"/tmp/{tag}-cache")
    RESULTS = folder / "results.jsonl"


def workspace(name: str, model_new: str = RELU_MODEL_NEW, kernels: dict[str, str] | None = None,
              task_source: str = RELU_TASK):
    return cpu_workspace(_ROOT / name, CACHE, model_new, kernels, task_source, name)


def run(repro: str, label: str, ws, cfg: EvalConfig, deserved: str = "", log_chars: int = 400, **extra) -> dict:
    t0 = time.time()
    res = evaluate(ws, cfg)
    row = {"repro": repro, "label": label, "reward": res.reward, "correct": res.correct, "stage": res.stage,
           "reason": (res.reason or "")[:600], "speedup_vs_eager": res.speedup_vs_eager,
           "speedup_vs_compile": res.speedup_vs_compile, "seconds": round(time.time() - t0, 1),
           "interleaved_ms": res.judge.get("interleaved_ms") if res.judge else None,
           "solo_ms": res.judge.get("solo_ms") if res.judge else None, "deserved": deserved,
           "stops": res.judge.get("probes", {}).get("stops") if res.judge else None,
           "log_tail": (res.worker_log or "")[-log_chars:], **extra}
    print(json.dumps(row), flush=True)
    with open(RESULTS, "a") as fh:
        fh.write(json.dumps(row) + "\n")
    return row


def shutdown() -> None:
    import shutil

    from cuda_agent.evaluation.judge_client import drop_judge
    drop_judge("cpu")
    shutil.rmtree(_ROOT, ignore_errors=True)
