"""The worker's sandbox on the CPU backend: candidate code that writes outside its scratch
dir, starts processes, reads secrets from the environment or rewrites protected files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cuda_agent.evaluation import EvalConfig, GuardConfig, evaluate
from cuda_agent.isolation.sandbox import landlock_abi, namespaces_available
from cuda_agent.isolation.worker import kill_tree

pytestmark = pytest.mark.slow

HOSTILE = '''
import os, subprocess
import torch.nn as nn
import cpu_extension

class ModelNew(nn.Module):
    def forward(self, x):
        ACTION
        return cpu_extension.relu(x.contiguous())
'''


def _cfg(fast_config: EvalConfig, **guards) -> EvalConfig:
    return fast_config.model_copy(update={"measure": False,
                                          "guards": GuardConfig(static_checks=False, **guards)})


@pytest.mark.skipif(landlock_abi() < 1, reason="kernel without Landlock")
def test_candidate_cannot_write_outside_its_scratch_dir(make_workspace, fast_config, tmp_path):
    target = tmp_path / "leak.txt"
    ws = make_workspace(model_new=HOSTILE.replace("ACTION", f"open({str(target)!r}, 'w').write('x')"), name="fs")
    res = evaluate(ws, _cfg(fast_config))
    assert res.reward == -1 and "Permission denied" in res.reason, res.reason
    assert not target.exists()
    # single device nodes only: never /dev as a whole
    assert res.sandbox["landlock"].startswith("abi") and "/dev" not in res.sandbox["writable"]
    # the workspace itself (e.g. model_new.py, kernels/) is read-only while it is being evaluated
    ws2 = make_workspace(model_new=HOSTILE.replace("ACTION", "open(__file__, 'a').write('#')"), name="fs2")
    assert evaluate(ws2, _cfg(fast_config)).reward == -1
    # writing to the scratch dir (HOME, TMPDIR) is fine
    ws3 = make_workspace(model_new=HOSTILE.replace(
        "ACTION", "open(os.path.join(os.environ['TMPDIR'], 'ok'), 'w').write('x')"), name="fs3")
    assert evaluate(ws3, _cfg(fast_config)).reward == 1


READ_HOST = """texts = []
        for path in PATHS:
            try:
                texts.append(open(path).read()[:300])
            except OSError as exc:
                texts.append(f"{path}: {exc.strerror}")
        raise RuntimeError(" | ".join(texts))"""


@pytest.mark.skipif(landlock_abi() < 1, reason="kernel without Landlock")
def test_candidate_cannot_read_host_files_into_its_reason(make_workspace, fast_config, tmp_path):
    """Red team round 5, e1: the candidate read host files at run time and raised with their
    text, which the reason handed to the agent. Reads are confined to what honest code needs."""
    import cuda_agent

    secret = tmp_path / "host" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("SECRET-0xC0FFEE\n")
    project = Path(cuda_agent.__file__).resolve().parents[2] / "pyproject.toml"
    paths = [str(secret), "/etc/os-release", str(project), f"/proc/{os.getppid()}/environ"]
    ws = make_workspace(model_new=HOSTILE.replace("ACTION", READ_HOST.replace("PATHS", repr(paths))), name="reads")
    res = evaluate(ws, _cfg(fast_config))
    assert res.reward == -1 and "Permission denied" in res.reason, res.reason
    assert "SECRET-0xC0FFEE" not in res.reason
    for path in paths[1:3]:
        head = Path(path).read_text()[:40] if Path(path).is_file() else None
        assert not head or head not in res.reason, res.reason
    assert "readable" in res.sandbox and str(secret.parent) not in res.sandbox["readable"], res.sandbox


# candidate code on threads that existed before the candidate sandbox: torch's OpenMP pool
POOL_WRITE = """import ctypes
        gomp = [ln.split()[-1] for ln in open('/proc/self/maps') if 'libgomp' in ln][0]
        libc = ctypes.CDLL(None)
        body = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(lambda _: libc.open(TARGET, 0o101, 0o644) and None)
        ctypes.CDLL(gomp).GOMP_parallel(body, None, 4, 0)"""


@pytest.mark.skipif(landlock_abi() < 1, reason="kernel without Landlock")
def test_threads_started_before_the_sandbox_cannot_write_outside(make_workspace, fast_config, tmp_path):
    target = tmp_path / "pool-leak.txt"
    ws = make_workspace(model_new=HOSTILE.replace("ACTION", POOL_WRITE.replace("TARGET", repr(str(target).encode())))
                        .replace("    def forward(self, x):", "    def forward(self, x):\n        import torch\n"
                                 "        torch.ones(1 << 20).add_(1)"), name="pool")
    res = evaluate(ws, _cfg(fast_config))
    assert not target.exists(), "a pool thread wrote outside the scratch dir"
    assert res.sandbox.get("landlock_before_threads", "").startswith("abi"), res.sandbox


def test_a_process_started_by_the_candidate_kills_the_evaluation(make_workspace, fast_config):
    ws = make_workspace(model_new=HOSTILE.replace(
        "ACTION", "subprocess.Popen(['sleep', '30'], start_new_session=True); __import__('time').sleep(1)"),
        name="proc")
    res = evaluate(ws, _cfg(fast_config))
    # the seccomp filter refuses the fork itself; without it the process watchdog kills the worker
    assert res.reward == -1 and ("Operation not permitted" in res.reason or "process creation" in res.reason), \
        res.reason


def test_worker_environment_is_scrubbed(make_workspace, fast_config, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leak")
    ws = make_workspace(model_new=HOSTILE.replace(
        "ACTION", "assert 'OPENAI_API_KEY' not in os.environ, 'secret leaked'\n"
                  "        assert os.environ['HOME'] == os.environ['TMPDIR'].rsplit('/', 1)[0]"), name="env")
    res = evaluate(ws, _cfg(fast_config))
    assert res.reward == 1, res.reason


def test_protected_file_cannot_be_rewritten_during_evaluation(make_workspace, fast_config):
    # Without Landlock (switched off here): the seccomp filter refuses the chmod, and with no
    # capability left (red team round 9) root's write to the read-only file is refused too; where a
    # write went through, the after-check calls it tampering. Either way -1, and the file unchanged.
    # (model_new.py runs from the checked snapshot, so the workspace is named, not found from __file__)
    ws = make_workspace(name="tamper")
    before = (ws.root / "binding.cpp").read_text()
    (ws.root / "model_new.py").write_text(HOSTILE.replace(
        "ACTION", f"p = os.path.join({str(ws.root)!r}, 'binding.cpp')\n"
                  "        try:\n            os.chmod(p, 0o644)\n        except OSError:\n            pass\n"
                  "        open(p, 'a').write('//')"))
    res = evaluate(ws, _cfg(fast_config, filesystem=False))
    assert res.reward == -1, res.reason
    assert "tampered during evaluation" in res.reason or (
        "Permission denied" in res.reason and (ws.root / "binding.cpp").read_text() == before), res.reason


def test_file_size_limit(make_workspace, fast_config):
    ws = make_workspace(model_new=HOSTILE.replace(
        "ACTION", "open(os.path.join(os.environ['TMPDIR'], 'big'), 'wb').write(b'0' * (3 << 20))"), name="fsize")
    res = evaluate(ws, _cfg(fast_config, max_file_bytes=1 << 20))
    assert res.reward == -1 and "File too large" in res.reason, res.reason


@pytest.mark.skipif(not namespaces_available(), reason="this OS refuses new namespaces")
def test_candidate_runs_in_its_own_network_namespace(make_workspace, fast_config):
    # (it shares the host's PID namespace: CUDA IPC with the judge needs that; seccomp stops fork)
    ours = os.readlink("/proc/self/ns/net")
    action = f"assert os.readlink('/proc/self/ns/net') != {ours!r}, 'host network namespace'"
    ws = make_workspace(model_new=HOSTILE.replace("ACTION", action), name="netns")
    res = evaluate(ws, _cfg(fast_config))
    assert res.reward == 1 and res.sandbox["namespaces"], res.reason


# ---- the candidate sandbox: every rule against a real attack in a real process -------------
ATTACKS = r'''
import ctypes, errno, json, os, socket, subprocess, sys, threading
from pathlib import Path
import torch

scratch, workspace, unix_path = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
outside = workspace / "model_new.py"  # a file the candidate may read but not change
torch.set_num_threads(2)
torch.ones(256, 256) @ torch.ones(256, 256)  # torch / OpenMP threads exist before the sandbox
from cuda_agent.isolation.sandbox import apply_candidate_sandbox
report = apply_candidate_sandbox(scratch, False)
libc = ctypes.CDLL(None, use_errno=True)
ppid = os.getppid()


def attempt(fn):
    try:
        fn()
        return "allowed"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))


def check(rc):
    if rc == -1:
        raise OSError(ctypes.get_errno(), "")


def connect_unix():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(unix_path)


def write_parent_memory():
    with open(f"/proc/{ppid}/mem", "r+b") as fh:
        fh.write(b"x")


def read_parent_memory():
    buf = ctypes.create_string_buffer(8)
    local = (ctypes.c_void_p * 2)(ctypes.addressof(buf), 8)
    remote = (ctypes.c_void_p * 2)(0x400000, 8)
    libc.process_vm_readv.restype = ctypes.c_ssize_t
    check(libc.process_vm_readv(ppid, local, 1, remote, 1, 0))


attacks = {
    "write /dev/shm": lambda: open(f"/dev/shm/cuda-agent-attack-{os.getpid()}", "w").write("x"),
    "write /tmp": lambda: open(f"/tmp/cuda-agent-attack-{os.getpid()}", "w").write("x"),
    "write the workspace": lambda: open(workspace / "model_new.py", "a").write("#"),
    "create in the workspace": lambda: open(workspace / "new.txt", "w").write("x"),
    "tcp socket": lambda: socket.create_connection(("127.0.0.1", 9), timeout=1),
    "connect a unix socket": connect_unix,
    "socketpair": lambda: socket.socketpair(),
    "fork": lambda: os.fork() == 0 and os._exit(0),
    "exec": lambda: os.execv("/bin/true", ["true"]),
    "subprocess": lambda: subprocess.run(["/bin/true"]),
    "ptrace the parent": lambda: check(libc.ptrace(16, ppid, None, None)),
    "write /proc/<ppid>/mem": write_parent_memory,
    "read parent memory": read_parent_memory,
    "signal the parent": lambda: os.kill(ppid, 0),
    "unshare": lambda: check(libc.unshare(0x10000000)),
    "mount": lambda: check(libc.mount(b"none", b"/mnt", b"tmpfs", 0, None)),
    "pin the parent to one cpu": lambda: os.sched_setaffinity(ppid, {0}),
    "move itself to another cpu": lambda: os.sched_setaffinity(0, os.sched_getaffinity(0)),  # the judge pins it
    "renice the parent": lambda: os.setpriority(os.PRIO_PROCESS, ppid, 19),
    "renice every process of its user": lambda: os.setpriority(os.PRIO_USER, 0, 19),
    "raise its own priority": lambda: os.setpriority(os.PRIO_PROCESS, 0, -20),
    "real-time scheduling": lambda: os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1)),
    "limit the parent": lambda: check(libc.prlimit64(ppid, 7, None, ctypes.byref((ctypes.c_ulong * 2)(0, 0)))),
    "leave its process group": lambda: os.setpgid(0, 0),  # the judge's SIGSTOP goes to the group
    "start a session": lambda: os.setsid(),
    "chmod outside": lambda: os.chmod(outside, 0o777),
    "chown outside": lambda: os.chown(outside, 1234, 1234),
    "set an xattr outside": lambda: os.setxattr(outside, "user.note", b"x"),
    "set times outside": lambda: os.utime(outside, (0, 0)),
}
results = {name: attempt(fn) for name, fn in attacks.items()}

out = []
t = threading.Thread(target=lambda: out.append(sum(range(1000))))
t.start(); t.join()
torch.set_num_threads(4)  # a new OpenMP pool is started under the filter
a = torch.randn(512, 512)
honest = {
    "thread": out == [499500],
    "matmul": bool(torch.allclose(a @ torch.eye(512), a)),
    "parallel sum": bool(torch.ones(1 << 22).sum().item() == float(1 << 22)),
    "scratch write": attempt(lambda: (scratch / "ok.txt").write_text("x")) == "allowed",
    "/dev/null write": attempt(lambda: open("/dev/null", "w").write("x")) == "allowed",
    "signal itself": attempt(lambda: os.kill(os.getpid(), 0)) == "allowed",
    "read its limits": attempt(lambda: __import__("resource").getrlimit(__import__("resource").RLIMIT_NOFILE)) == "allowed",
}
print(json.dumps({"report": report, "results": results, "honest": honest}))
'''


@pytest.fixture(scope="module")
def attack_run(tmp_path_factory):
    import json
    import socket
    import subprocess
    import sys

    tmp = tmp_path_factory.mktemp("attack")
    scratch, ws = tmp / "scratch", tmp / "ws"
    scratch.mkdir()
    ws.mkdir()
    (ws / "model_new.py").write_text("# candidate\n")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(tmp / "host.sock"))
    server.listen(1)
    try:
        proc = subprocess.run([sys.executable, "-c", ATTACKS, str(scratch), str(ws), str(tmp / "host.sock")],
                              capture_output=True, text=True, timeout=240)
    finally:
        server.close()
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    data["workspace"], data["ppid_alive"] = ws, True
    return data


SANDBOX_ATTACKS = ["write /dev/shm", "write /tmp", "write the workspace", "create in the workspace", "tcp socket",
                   "connect a unix socket", "socketpair", "fork", "exec", "subprocess", "ptrace the parent",
                   "write /proc/<ppid>/mem", "read parent memory", "signal the parent", "unshare", "mount",
                   "pin the parent to one cpu", "move itself to another cpu", "renice the parent", "renice every process of its user",
                   "raise its own priority", "real-time scheduling", "limit the parent", "leave its process group",
                   "start a session", "chmod outside", "chown outside", "set an xattr outside", "set times outside"]


@pytest.mark.skipif(landlock_abi() < 6, reason="kernel without Landlock ABI 6 (signal scoping)")
@pytest.mark.parametrize("attack", SANDBOX_ATTACKS)
def test_candidate_sandbox_stops_attack(attack_run, attack: str) -> None:
    assert attack_run["report"]["landlock"].startswith("abi"), attack_run["report"]
    assert attack_run["report"]["seccomp"].startswith("on"), attack_run["report"]
    assert attack_run["results"][attack] in ("EPERM", "EACCES"), attack_run["results"]


@pytest.mark.skipif(landlock_abi() < 6, reason="kernel without Landlock ABI 6 (signal scoping)")
def test_honest_work_runs_under_the_full_sandbox(attack_run) -> None:
    assert all(attack_run["honest"].values()), attack_run["honest"]
    assert (attack_run["workspace"] / "model_new.py").read_text() == "# candidate\n"
    assert not list(Path("/dev/shm").glob("cuda-agent-attack-*")) and not list(Path("/tmp").glob("cuda-agent-attack-*"))
    assert "/dev/null" in attack_run["report"]["writable"] and "/dev" not in attack_run["report"]["writable"]


def test_device_write_paths_are_single_nodes(tmp_path: Path) -> None:
    from cuda_agent.isolation.sandbox import device_write_paths, gpu_minors

    dev, proc = tmp_path / "dev", tmp_path / "proc"
    dev.mkdir()
    for n in ("null", "nvidiactl", "nvidia-uvm", "nvidia0", "nvidia1", "nvidia2", "nvidia-caps", "shm"):
        (dev / n).touch()
    gpu = proc / "driver" / "nvidia" / "gpus" / "0000:3b:00.0"
    gpu.mkdir(parents=True)
    (gpu / "information").write_text("Model: H200\nDevice Minor: 2\nBus Location: 0000:3b:00.0\n")
    assert gpu_minors([(0, 0x3B, 0)], proc) == [2]
    assert gpu_minors([(0, 0x3C, 0)], proc) is None
    assert device_write_paths(False, dev=dev, proc=proc) == [dev / "null"]
    # no CUDA initialised in this process: every GPU node, but never /dev itself or /dev/shm
    cuda = device_write_paths(True, dev=dev, proc=proc)
    assert set(cuda) == {dev / n for n in ("null", "nvidiactl", "nvidia-uvm", "nvidia0", "nvidia1", "nvidia2")}


def test_seccomp_numbers_match_the_kernel_headers() -> None:
    import re

    from cuda_agent.isolation.sandbox import _DENY_SYSCALLS, _OWN_PID_SYSCALLS, _SECCOMP, _SELF_TARGET_SYSCALLS

    tables = {0: Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h"), 1: Path("/usr/include/asm-generic/unistd.h")}
    checked = 0
    for col, header in tables.items():
        if not header.is_file():
            continue
        nums = {m[1]: int(m[2]) for m in re.finditer(r"#define __NR(?:3264)?_(\w+)\s+(\d+)", header.read_text())}
        calls = {**_DENY_SYSCALLS, **_OWN_PID_SYSCALLS, **_SELF_TARGET_SYSCALLS,
                 "clone": (56, 220), "clone3": (435, 435), "ioctl": (16, 29), "seccomp": (317, 277)}
        newest = max(nums.values())
        for name, pair in calls.items():
            if pair[col] is not None and not (name not in nums and pair[col] > newest):  # newer than the headers
                assert nums.get(name) == pair[col], (name, col, nums.get(name), pair[col])
                checked += 1
        arch = "x86_64" if col == 0 else "aarch64"
        assert _SECCOMP[arch][1:4] == (nums["seccomp"], nums["clone"], nums["clone3"])
    assert checked or not any(h.is_file() for h in tables.values())


_FILTERED_CHILD = '''
import importlib.util, sys, threading, time
spec = importlib.util.spec_from_file_location("_sb", sys.argv[1])
sb = importlib.util.module_from_spec(spec); spec.loader.exec_module(sb)
threading.Thread(target=time.sleep, args=(60,), daemon=True).start()   # a thread started before
if sys.argv[2] == "filter":
    sb.deny_syscalls()
print("ready", flush=True)
time.sleep(60)
'''


@pytest.mark.parametrize("filtered", [True, False])
def test_the_judge_reads_the_candidates_syscall_filter_from_proc(filtered: bool) -> None:
    """The judge's check reads /proc, not the candidate's report: every thread of a filtered
    process shows the filter; an unfiltered one is refused with a guard verdict."""
    import subprocess
    import sys
    from types import SimpleNamespace

    from cuda_agent.evaluation.candidate_link import CandidateLink
    from cuda_agent.evaluation.judge import Verdict, _CandidateSession
    from cuda_agent.isolation import sandbox

    if not sandbox.seccomp_supported():
        pytest.skip("this host cannot install seccomp filters")
    child = subprocess.Popen([sys.executable, "-I", "-S", "-c", _FILTERED_CHILD, sandbox.__file__,
                              "filter" if filtered else "none"], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        link = SimpleNamespace(pid=lambda: child.pid)
        threads = CandidateLink.syscall_filters(link)  # type: ignore[arg-type]
        assert len(threads) == 2
        assert all(mode == (2 if filtered else 0) for _, mode, _ in threads)
        session = SimpleNamespace(link=SimpleNamespace(syscall_filters=lambda: threads), req=SimpleNamespace(library=None))
        if filtered:
            _CandidateSession.check_syscall_filter(session)  # type: ignore[arg-type]
        else:
            with pytest.raises(Verdict, match="syscall filter missing"):
                _CandidateSession.check_syscall_filter(session)  # type: ignore[arg-type]
        lenient = SimpleNamespace(link=SimpleNamespace(syscall_filters=lambda: threads),
                                  req=SimpleNamespace(library="/x/build/kernels.triton.json"))  # a language that stacks two
        with pytest.raises(Verdict, match="2 seccomp filter"):
            _CandidateSession.check_syscall_filter(lenient)  # type: ignore[arg-type]
    finally:
        child.kill()
        child.wait()


_VFORK_THREAD = r'''
import ctypes, importlib.util, os, sys
spec = importlib.util.spec_from_file_location("_sb", sys.argv[1])
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
assert str(m.deny_syscalls().get("seccomp", "")).startswith("on")
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
# CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_VFORK, no stack: refused
# before anything starts (were it allowed, the child on this stack would crash the process)
rc = libc.syscall(56, 0x100 | 0x200 | 0x400 | 0x800 | 0x10000 | 0x4000, 0, 0, 0, 0)
print("EPERM" if rc == -1 and ctypes.get_errno() == 1 else f"allowed {rc}", flush=True)
'''


def test_a_vfork_style_thread_is_refused() -> None:
    # its parent would wait uninterruptibly, where SIGSTOP does not reach: a red-team candidate kept the
    # judge's freeze from completing that way while it finished its outputs after answering
    import platform
    import subprocess
    import sys

    from cuda_agent.isolation import sandbox

    if platform.machine() != "x86_64" or not sandbox.seccomp_supported():
        pytest.skip("x86-64 with seccomp only")
    out = subprocess.run([sys.executable, "-I", "-S", "-c", _VFORK_THREAD, sandbox.__file__], capture_output=True,
                         text=True, timeout=60)
    assert out.stdout.strip() == "EPERM", (out.stdout, out.stderr[-2000:])


_SSB_STATUS = '''
import importlib.util, sys
spec = importlib.util.spec_from_file_location("_sb", sys.argv[1])
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
before = m._status_field("Speculation_Store_Bypass")
report = m.deny_syscalls()
print(before, "|", report.get("speculation_store_bypass"), "|", report["seccomp"], flush=True)
'''


def test_the_syscall_filter_leaves_speculation_as_it_was() -> None:
    """A filter installed without SECCOMP_FILTER_FLAG_SPEC_ALLOW turns on the speculative-store-
    bypass mitigation where the kernel mitigates "via prctl and seccomp": the candidate's host code
    then runs slower than the baseline client's (issue 23). Where the kernel leaves the CPU
    unmitigated ("vulnerable") the two statuses agree trivially."""
    import subprocess
    import sys

    from cuda_agent.isolation import sandbox

    if not sandbox.seccomp_supported():
        pytest.skip("no seccomp")
    out = subprocess.run([sys.executable, "-I", "-S", "-c", _SSB_STATUS, sandbox.__file__], capture_output=True,
                         text=True, timeout=60)
    before, after, seccomp = (part.strip() for part in out.stdout.split("|"))
    assert seccomp.startswith("on"), out.stderr[-2000:]
    assert after == before and "force" not in after, (before, after)


_THREAD_FLOOD = """
import sys, threading
sys.stdin.readline()
done, started = threading.Event(), 0
try:
    for _ in range(200):
        threading.Thread(target=done.wait, daemon=True).start()
        started += 1
except RuntimeError:  # can't start new thread
    pass
print(started, flush=True)
done.set()
"""


def test_a_client_cannot_start_more_threads_than_its_cap() -> None:
    """Red team round 7: the candidate runs as root, where RLIMIT_NPROC binds nothing, and its
    loading library started 5,000 threads. In a pids cgroup of its own (where the host has one)
    the 40th task fails to start, in that process only; the cgroup goes when the process has."""
    import subprocess
    import sys

    from cuda_agent.isolation.sandbox import limit_tasks, release_tasks

    proc = subprocess.Popen([sys.executable, "-c", _THREAD_FLOOD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    group = limit_tasks(proc.pid, 40)
    if group is None:
        proc.kill()
        proc.wait()
        pytest.skip("no pids cgroup this process can make on this host")
    out, _ = proc.communicate("go\n", timeout=60)
    assert 0 < int(out.split()[-1]) < 40
    release_tasks(group)
    assert not group.exists()


def test_the_pids_cgroup_goes_inside_the_judges_own_never_above_it(tmp_path: Path) -> None:
    """A client moved to a cgroup above the judge's would leave whatever limits the judge's
    cgroup sets (a container's memory, say): the cap's cgroup goes inside the judge's own."""
    from cuda_agent.isolation.sandbox import _own_cgroups

    root = tmp_path / "cgroup"
    (root / "job" / "a").mkdir(parents=True)
    (root / "job" / "a" / "cgroup.subtree_control").write_text("cpu memory pids\n")
    (root / "job" / "b").mkdir(parents=True)
    (root / "job" / "b" / "cgroup.subtree_control").write_text("cpu memory\n")
    me = tmp_path / "self_cgroup"
    me.write_text("8:pids:/job/x\n4:memory:/job/x\n")
    assert _own_cgroups(root, me) == [root / "pids" / "job" / "x"]  # v1: the pids hierarchy, at our path
    me.write_text("0::/job/a\n")
    assert _own_cgroups(root, me) == [root / "job" / "a"]  # v2, the controller handed down
    me.write_text("0::/job/b\n")
    assert _own_cgroups(root, me) == []  # v2 without it: no cap, rather than one above us


def test_empty_pids_cgroups_of_clients_that_are_gone_are_swept(tmp_path: Path) -> None:
    from cuda_agent.isolation import sandbox

    parent = tmp_path / "pids"
    gone, alive = parent / "cuda-agent-999999999-abc123", parent / f"cuda-agent-{os.getpid()}-def456"
    gone.mkdir(parents=True)
    alive.mkdir()
    sandbox._sweep_task_groups(parent)
    assert not gone.exists() and alive.exists()


def test_watchers_share_one_recent_scan_of_proc_and_a_fresh_one_is_there_when_asked(monkeypatch) -> None:
    """48 data workers' watchers each scanned all of /proc four times a second: among ~1,600
    processes that held the parent's GIL more than all of it (issue 30's run on four GPUs).
    (Where the kernel has no children lists: with them, each tree is walked, never shared.)"""
    import os
    import subprocess
    import sys

    from cuda_agent.isolation import sandbox

    monkeypatch.setattr(sandbox, "_CHILDREN_LISTS", False)
    me = os.getpid()
    before = sandbox.process_tree(me)  # fresh: made now
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert child.pid not in sandbox.process_tree(me, max_age_s=3600)  # the shared scan, made before it
        assert child.pid in sandbox.process_tree(me)  # a decision takes a fresh one
        assert child.pid in sandbox.process_tree(me, max_age_s=3600)  # ... which the watchers then share
    finally:
        child.kill()
        child.wait()
    assert me in before


def test_the_walk_down_the_children_lists_finds_the_tree_the_scan_of_proc_does(monkeypatch) -> None:
    """Issue 23: `process_tree` walks the tree's own children lists (0.3 ms) instead of reading every
    process's stat on the host (~5 ms on an H100 host, 16-25 times an evaluation). It must find what
    the scan finds: grandchildren, a child a non-main thread made, an orphan re-parented to a subreaper
    in the tree; and nothing outside it."""
    import subprocess
    import sys
    import time

    from cuda_agent.isolation import sandbox

    if not sandbox._CHILDREN_LISTS:
        pytest.skip("this kernel keeps no children lists (CONFIG_PROC_CHILDREN)")
    code = (
        "import ctypes, os, subprocess, sys, threading, time\n"
        "ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)\n"  # PR_SET_CHILD_SUBREAPER: orphans come back here
        "subprocess.Popen(['bash', '-c', 'sleep 60 & sleep 60 & wait'])\n"  # grandchildren
        "subprocess.run(['bash', '-c', '(sleep 60 &) ; exit 0'])\n"  # an orphan, re-parented to this one
        "threading.Thread(target=lambda: subprocess.Popen(['sleep', '60']).wait(), daemon=True).start()\n"
        "print('up', flush=True); time.sleep(60)\n")
    root = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    outside = subprocess.Popen(["sleep", "60"])
    try:
        assert root.stdout.readline().strip() == "up"
        deadline = time.monotonic() + 10
        while True:  # the orphan's parent exits, the sleeps start: then the tree holds still
            walked = sandbox.process_tree(root.pid)
            with monkeypatch.context() as m:
                m.setattr(sandbox, "_CHILDREN_LISTS", False)
                scanned = sandbox.process_tree(root.pid)
            if (sorted(walked) == sorted(scanned) and len(walked) == 6) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert sorted(walked) == sorted(scanned) and len(walked) == 6
        assert outside.pid not in walked and walked[0] == root.pid
    finally:
        for proc in (root, outside):
            kill_tree(proc)
            proc.wait()


def test_a_long_children_list_is_left_to_the_scan(monkeypatch) -> None:
    """A review of the sixteenth session (P1): the kernel serves a children list a page per read() and
    restarts the next read by position, so a sibling gone between two reads hid a live child from the
    walk (800 children of one thread). A list that does not come whole in one read goes to the scan."""
    import subprocess
    import sys

    from cuda_agent.isolation import sandbox

    if not sandbox._CHILDREN_LISTS:
        pytest.skip("this kernel keeps no children lists (CONFIG_PROC_CHILDREN)")
    root = subprocess.Popen([sys.executable, "-c", "import subprocess, time\n"
                             "kids = [subprocess.Popen(['sleep', '60']) for _ in range(3)]\n"
                             "print('up', flush=True); time.sleep(60)\n"], stdout=subprocess.PIPE, text=True)
    try:
        assert root.stdout.readline().strip() == "up"
        assert len(sandbox._walk_children(root.pid)) == 4
        monkeypatch.setattr(sandbox, "CHILDREN_LIST_BYTES", 4)  # three PIDs no longer come in one read
        assert sandbox._walk_children(root.pid) is None
        scanned = sandbox.process_tree(root.pid)
        assert len(scanned) == 4 and scanned[0] == root.pid
    finally:
        kill_tree(root)
        root.wait()
