"""d2: what d1 (a scratch tree deeper than Python's recursion limit) leaves in a warm judge. The
RecursionError escapes `Judge.retire` before the client is put on the retired list, so its arena is
never closed: on the CPU backend `_MemfdArena.close` is the only place its memfd's fd is closed
(no finalizer), so the fd and every page of the arena stay in the judge for the judge's life. Runs
K attack evaluations on a 64 MiB relu (arena = one 64 MiB slot) in one judge, then an honest one,
counting the judge's memfd fds and its shared memory after each. MODE: attack=K | control=K (same
wrong kernel, no deep tree)."""
import sys, time, glob, os
from common import *
mode = sys.argv[1] if len(sys.argv) > 1 else "attack=3"
kind, k = mode.split("="); k = int(k)
depth = 3000 if kind == "attack" else 0
BIG_TASK = RELU_TASK.replace("torch.randn(64, 1024)", "torch.randn(4096, 4096)")
BINDING = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "d1_deep_scratch.py")).read().split("BINDING = r'''")[1].split("'''")[0]
BINDING = BINDING.replace("DEPTH", str(depth)).replace("WRONG", "1").replace("RESOLVER", RESOLVER)
for kk, v in {"GETENV_": "getenv", "CHDIR_": "chdir", "MKDIR_": "mkdir"}.items():
    BINDING = BINDING.replace('"%s"' % kk, '"%s"' % enc(v))
def judge_pid():
    for line in leftovers()["procs"]:
        if "cuda_agent.evaluation.judge" in line:
            return int(line.split()[0])
def judge_mem():
    pid = judge_pid()
    if pid is None: return None
    fds = 0
    for f in glob.glob(f"/proc/{pid}/fd/*"):
        try:
            if "memfd:cuda-agent-arena" in os.readlink(f): fds += 1
        except OSError: pass
    st = dict(l.split(":", 1) for l in open(f"/proc/{pid}/status").read().splitlines() if ":" in l)
    return dict(pid=pid, arena_fds=fds, fds=len(os.listdir(f"/proc/{pid}/fd")), RssShmem=st.get("RssShmem", "").strip(),
                Shmem_host=[l for l in open("/proc/meminfo").read().splitlines() if l.startswith("Shmem:")][0])
seen = []
for i in range(k):
    res = run(f"d2_{mode}_{i}", RELU_MODEL_NEW, {"relu.cpp": RELU_KERNEL, "relu_binding.cpp": BINDING}, task=BIG_TASK,
              note=f"{kind}: depth {depth}, wrong kernel, 64 MiB relu")
    time.sleep(0.5)
    seen.append(dict(i=i, reward=res.reward, infra=(res.reason or "").startswith("infrastructure"), judge=judge_mem()))
    print("AFTER", seen[-1])
res = run(f"d2_{mode}_honest", RELU_MODEL_NEW, {"relu.cpp": RELU_KERNEL, "relu_binding.cpp": RELU_BINDING}, task=BIG_TASK,
          note="honest relu after")
time.sleep(0.5)
seen.append(dict(i="honest", reward=res.reward, reason=(res.reason or "")[:120], judge=judge_mem()))
record(name=f"d2_deep_scratch_leak_{mode}_summary", steps=seen)
