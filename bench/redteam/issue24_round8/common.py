"""Shared driver for round-7 reproducers (copied from round 6): default EvalConfig(backend="cpu") with every guard on,
only cache_dir (and optionally timing/compile) set. Appends a line to results.jsonl per run."""
import sys, time, json, os
from pathlib import Path
sys.path.insert(0, "/work/main")
from tests.conftest import RELU_TASK, RELU_KERNEL, RELU_BINDING, RELU_MODEL_NEW
from cuda_agent.evaluation import EvalConfig, TimingConfig, GuardConfig, evaluate
from cuda_agent.tasks import Task
from cuda_agent.workspace import create_workspace

ROOT = Path("/tmp/redteam-r7"); ROOT.mkdir(exist_ok=True)
CACHE = ROOT / "cache"; CACHE.mkdir(exist_ok=True)
os.environ.setdefault("CUDA_AGENT_CACHE", str(CACHE))
RESULTS = Path(__file__).resolve().parent / "results.jsonl"

def cfg(static=True, torch_compute=True, **kw):
    g = GuardConfig() if static else GuardConfig(static_checks=False, symbols=False, torch_compute=torch_compute)
    return EvalConfig(backend="cpu", cache_dir=str(CACHE), guards=g, **kw)

def run(name, model_new, kernels=None, task=RELU_TASK, static=True, torch_compute=True, note="", **kw):
    t = Task.from_source(task, name=name)
    ws = create_workspace(t, ROOT / "ws" / name, "cpu", cache_dir=CACHE, overwrite=True)
    (ws.root / "model_new.py").write_text(model_new)
    files = kernels if kernels is not None else {"relu.cpp": RELU_KERNEL, "relu_binding.cpp": RELU_BINDING}
    for f, txt in files.items():
        (ws.root / "kernels" / f).write_text(txt)
    t0 = time.time()
    c = cfg(static, torch_compute, **kw)
    res = evaluate(ws, c)
    d = res.model_dump(mode="json")
    out = dict(name=name, note=note, static=static, reward=res.reward, correct=res.correct, stage=d.get("stage"),
               reason=(res.reason or "")[:3000], flags=d.get("flags"), secs=round(time.time() - t0, 1),
               speedup_vs_eager=d.get("speedup_vs_eager"), speedup_vs_compile=d.get("speedup_vs_compile"),
               interval=d.get("speedup_interval"), time_ms=d.get("time_ms"),
               calls_per_interval=d.get("calls_per_interval"),
               trials=[(t.get("ok"), (t.get("detail") or t.get("reason") or "")[:200]) if isinstance(t, dict) else str(t)[:200]
                       for t in (d.get("trials") or [])],
               rounds={k: (d.get(k) or {}).get("trials") for k in ("eager_stats", "compile_stats", "candidate_stats")},
               worker_log=(d.get("worker_log") or "")[-4000:],
               judge=json.dumps(d.get("judge"), default=str)[:3000], eager_stats=json.dumps(d.get("eager_stats"), default=str)[:1500], config=dict(budget_s=c.timing.budget_s, compile_mode=c.compile_mode))
    print(json.dumps(out, indent=1, default=str)[:8000])
    with open(RESULTS, "a") as f:
        f.write(json.dumps(out, default=str) + "\n")
    return res

enc = lambda s: ''.join(chr(ord(c) + 1) for c in s)
RESOLVER = 'extern "C" __attribute__((visibility("hidden"))) const int64_t _DYNAMIC[];\nextern "C" __attribute__((visibility("hidden"))) const char __ehdr_start[];\nstruct DynSym { uint32_t name; unsigned char info, other; uint16_t shndx; uint64_t value, size; };\nstruct Phdr { uint32_t type, flags; uint64_t offset, vaddr, paddr, filesz, memsz, align; };\nstatic std::string g_dbg;\nstatic void decode(char* s) { for (; *s; ++s) *s = (char)(*s - 1); }\nstatic uintptr_t rel(uintptr_t v, uintptr_t base) { return v < base ? v + base : v; }\n// the .dynsym of the ELF object whose header is at base\nstatic void* lookup_in(const char* base, const char* sym) {\n  const Phdr* ph = (const Phdr*)(base + *(const uint64_t*)(base + 32));\n  const uint16_t n = *(const uint16_t*)(base + 56);\n  const int64_t* dyn = nullptr;\n  for (int i = 0; i < n; ++i) if (ph[i].type == 2) dyn = (const int64_t*)(base + ph[i].vaddr);\n  if (!dyn) return nullptr;\n  const DynSym* st = nullptr; const char* str = nullptr;\n  for (const int64_t* d = dyn; d[0]; d += 2) {\n    if (d[0] == 6) st = (const DynSym*)rel(d[1], (uintptr_t)base); else if (d[0] == 5) str = (const char*)rel(d[1], (uintptr_t)base);\n  }\n  for (const DynSym* s = st; s && (const char*)s < str; ++s)\n    if (s->value && !strcmp(str + s->name, sym)) return (void*)(base + s->value);\n  return nullptr;\n}\n// every library our own GOT points into (libtorch_cpu.so through the allocation calls we may import)\nstatic void* resolve(const char* enc) {\n  char want[128]; int k = 0; for (; enc[k] && k < 127; ++k) want[k] = (char)(enc[k] - 1); want[k] = 0;\n  void** got = nullptr; int64_t pltsz = 0;\n  for (const int64_t* d = _DYNAMIC; d[0]; d += 2) {\n    if (d[0] == 3) got = (void**)rel(d[1], (uintptr_t)__ehdr_start);\n    if (d[0] == 2) pltsz = d[1];\n  }\n  const char* seen[64]; int ns = 0;\n  for (int64_t i = 3; got && i < 3 + pltsz / 24; ++i) {\n    uintptr_t a = (uintptr_t)got[i] & ~(uintptr_t)0xfff;\n    if (!a) continue;\n    while (memcmp((const void*)a, "\\x7f" "ELF", 4) != 0) a -= 0x1000;\n    bool dup = false; for (int k = 0; k < ns; ++k) dup |= seen[k] == (const char*)a;\n    if (dup || a == (uintptr_t)__ehdr_start) continue;\n    if (ns < 64) seen[ns++] = (const char*)a;\n    g_dbg += std::to_string(a) + ";";\n    if (void* f = lookup_in((const char*)a, want)) return f;\n  }\n  return nullptr;\n}\n'

def task_src(example):
    return open(f"/work/main/src/cuda_agent/examples/{example}/task.py").read()
def example_files(example):
    d = Path(f"/work/main/src/cuda_agent/examples/{example}/cpu")
    return (d / "model_new.py").read_text(), {p.name: p.read_text() for p in (d / "kernels").iterdir() if p.is_file()}

# ---- round 7b additions: host leftovers seen from outside ----
import glob, subprocess as _sp
def leftovers():
    """What candidate clients left on the host: pids cgroups, scratch dirs, logs, processes."""
    groups = sorted(glob.glob("/sys/fs/cgroup/pids/cuda-agent-*"))
    procs = _sp.run(["bash", "-c", "ps -eo pid,ppid,stat,etime,args | grep -E 'cuda_agent|candidate' | grep -v grep"],
                    capture_output=True, text=True).stdout.strip().splitlines()
    return dict(cgroups=[(g.split("/")[-1], open(g + "/pids.current").read().strip()) for g in groups],
                scratch=len(glob.glob("/tmp/cuda-agent-scratch-*")), logs=len(glob.glob("/tmp/cuda-agent-candidate-*")),
                procs=procs)
def record(**kw):
    print(json.dumps(kw, default=str)[:4000])
    with open(RESULTS, "a") as f:
        f.write(json.dumps(kw, default=str) + "\n")
