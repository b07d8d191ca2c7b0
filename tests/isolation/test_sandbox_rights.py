"""Every Landlock right the candidate sandbox handles, each with an attack of its own.

One small child process (isolated Python, sandbox.py loaded by path, no torch: well under a
second) runs each attack three times: on a control directory before the sandbox (the attack
is real: it works unconfined), on a directory outside scratch after `restrict_writes` (it must
be refused), and inside scratch (honest work there must still work). So a right dropped from
the ruleset (truncate, refer, a make_* right, TCP, the scopes, execute) fails its own test."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from cuda_agent.isolation import sandbox
from cuda_agent.isolation.sandbox import landlock_abi

ABI = landlock_abi()
pytestmark = pytest.mark.skipif(ABI < 1, reason="kernel without Landlock")

CHILD = r'''
import errno, importlib.util, json, os, socket, stat, subprocess, sys
from pathlib import Path
spec = importlib.util.spec_from_file_location("_sb", sys.argv[1])
sb = importlib.util.module_from_spec(spec); spec.loader.exec_module(sb)
tmp = Path(sys.argv[2]); port = int(sys.argv[3]); abstract = sys.argv[4].encode()
control, outside, scratch, bins = tmp / "control", tmp / "outside", tmp / "scratch", tmp / "bins"
granted = outside / "granted"   # a single file (like a device node) granted outside scratch
ppid = os.getppid()


def attempt(fn):
    try:
        fn()
        return "allowed"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))


def bind_unix(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.bind(str(path))
    finally:
        s.close()


def connect(family, address):
    s = socket.socket(family, socket.SOCK_STREAM)
    try:
        s.connect(address)
    finally:
        s.close()


def bind_tcp():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", 0))
    finally:
        s.close()


def fs_actions(root):
    return {
        "write_file": lambda: open(root / "victim", "a").write("x"),
        "truncate": lambda: os.truncate(root / "victim", 0),
        "remove_file": lambda: os.unlink(root / "doomed"),
        "remove_dir": lambda: os.rmdir(root / "emptydir"),
        "make_reg": lambda: open(root / "new", "x").close(),
        "make_dir": lambda: os.mkdir(root / "newdir"),
        "make_sym": lambda: os.symlink("/etc/hostname", root / "link"),
        "make_fifo": lambda: os.mkfifo(root / "fifo"),
        "make_sock": lambda: bind_unix(root / "sock"),
        "make_char": lambda: os.mknod(root / "chr", stat.S_IFCHR | 0o600, os.makedev(1, 3)),
        "make_block": lambda: os.mknod(root / "blk", stat.S_IFBLK | 0o600, os.makedev(7, 200)),
        "refer": lambda: os.rename(root / "sub_a" / "moved", root / "sub_b" / "moved"),
    }


def other_actions():
    return {
        "tcp_connect": lambda: connect(socket.AF_INET, ("127.0.0.1", port)),
        "tcp_bind": bind_tcp,
        "abstract_unix_connect": lambda: connect(socket.AF_UNIX, b"\0" + abstract),
        "signal_parent": lambda: os.kill(ppid, 0),
    }


out = {"abi": sb.landlock_abi()}
out["control"] = {k: attempt(f) for k, f in {**fs_actions(control), **other_actions()}.items()}
out["control"]["exec"] = attempt(lambda: subprocess.run([str(bins / "denied" / "true")], check=True))
execs = [bins / "allowed", *[Path(p) for p in ("/lib", "/lib64", "/usr/lib", "/usr/lib64")]]
out["report"] = sb.restrict_writes([scratch, granted], executable=execs if sys.argv[5] == "exec" else None)
out["outside"] = {k: attempt(f) for k, f in {**fs_actions(outside), **other_actions()}.items()}
out["outside"]["hardlink_into_scratch"] = attempt(lambda: os.link(outside / "victim2", scratch / "alias"))
out["outside"]["rename_into_scratch"] = attempt(lambda: os.rename(outside / "victim2", scratch / "moved_in"))
out["outside"]["create_beside_granted"] = attempt(lambda: open(outside / "granted2", "w").close())
out["scratch"] = {k: attempt(f) for k, f in fs_actions(scratch).items()}
out["granted"] = {
    "open_w": attempt(lambda: open(granted, "w").write("ok")),    # O_TRUNC: /dev/null opened for writing
    "truncate": attempt(lambda: os.truncate(granted, 0)),
    "append": attempt(lambda: open(granted, "a").write("x")),
}
out["exec_unlisted"] = attempt(lambda: subprocess.run([str(bins / "denied" / "true")], check=True))
if sys.argv[5] == "exec":
    out["exec"] = {"allowed": attempt(lambda: subprocess.run([str(bins / "allowed" / "true")], check=True)),
                   "denied": attempt(lambda: subprocess.run([str(bins / "denied" / "true")], check=True))}
print(json.dumps(out))
'''

FS_RIGHTS = {  # right -> the least Landlock ABI that has it
    "write_file": 1, "truncate": 3, "remove_file": 1, "remove_dir": 1, "make_reg": 1, "make_dir": 1, "make_sym": 1,
    "make_fifo": 1, "make_sock": 1, "make_char": 1, "make_block": 1, "refer": 2,
}
OTHER_RIGHTS = {"tcp_connect": 4, "tcp_bind": 4, "abstract_unix_connect": 6, "signal_parent": 6}
REFUSED = ("EACCES", "EPERM", "EXDEV")


def _layout(root: Path) -> None:
    root.mkdir()
    (root / "victim").write_text("keep me")
    (root / "victim2").write_text("keep me too")
    (root / "doomed").write_text("x")
    (root / "emptydir").mkdir()
    (root / "sub_a").mkdir()
    (root / "sub_b").mkdir()
    (root / "sub_a" / "moved").write_text("x")


def _run(tmp: Path, mode: str) -> dict:
    for name in ("control", "outside", "scratch"):
        _layout(tmp / name)
    (tmp / "outside" / "granted").write_text("device node stand-in")
    for sub in ("allowed", "denied"):
        (tmp / "bins" / sub).mkdir(parents=True)
        shutil.copy2(shutil.which("true") or "/bin/true", tmp / "bins" / sub / "true")
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(8)
    abstract = f"cuda-agent-rights-{os.getpid()}-{mode}"
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind(b"\0" + abstract.encode())
    unix.listen(8)
    try:
        proc = subprocess.run([sys.executable, "-I", "-S", "-c", CHILD, sandbox.__file__, str(tmp),
                               str(tcp.getsockname()[1]), abstract, mode], capture_output=True, text=True, timeout=60)
    finally:
        tcp.close()
        unix.close()
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["report"]["landlock"] == f"abi {ABI}", out["report"]
    return out


@pytest.fixture(scope="module")
def rights(tmp_path_factory) -> dict:
    return _run(tmp_path_factory.mktemp("rights"), "writes")


@pytest.fixture(scope="module")
def exec_rights(tmp_path_factory) -> dict:
    return _run(tmp_path_factory.mktemp("exec"), "exec")


@pytest.mark.parametrize("right", list(FS_RIGHTS) + list(OTHER_RIGHTS))
def test_each_right_is_refused_outside_scratch(rights: dict, right: str) -> None:
    need = {**FS_RIGHTS, **OTHER_RIGHTS}[right]
    if ABI < need:
        pytest.skip(f"Landlock ABI {ABI} < {need}")
    assert rights["control"][right] == "allowed", f"the attack does not work even unconfined: {rights['control']}"
    assert rights["outside"][right] in REFUSED, rights["outside"]


@pytest.mark.parametrize("right", list(FS_RIGHTS))
def test_each_right_still_works_inside_scratch(rights: dict, right: str) -> None:
    if rights["control"][right] != "allowed":
        pytest.skip(f"{right} does not work here even unconfined")
    assert rights["scratch"][right] == "allowed", rights["scratch"]


def test_truncate_outside_scratch_leaves_the_file_whole(rights: dict, tmp_path_factory) -> None:
    if ABI < 3:
        pytest.skip("Landlock ABI < 3 (no truncate right)")
    assert rights["outside"]["truncate"] in REFUSED
    victim = Path(rights["report"]["writable"][0]).parent / "outside" / "victim"
    assert victim.read_text() == "keep me"


def test_files_outside_cannot_be_brought_into_scratch(rights: dict) -> None:
    # a hard link (or a rename) of an outside file into scratch would make it writable there
    assert rights["outside"]["hardlink_into_scratch"] in REFUSED
    assert rights["outside"]["rename_into_scratch"] in REFUSED


def test_a_single_granted_file_takes_file_rights_only(rights: dict) -> None:
    assert rights["granted"] == {"open_w": "allowed", "truncate": "allowed", "append": "allowed"}, rights["granted"]
    assert rights["outside"]["create_beside_granted"] in REFUSED


def test_the_report_says_what_was_enforced(rights: dict) -> None:
    report = rights["report"]
    assert report["tcp_blocked"] is (ABI >= 4) and report["signals_scoped"] is (ABI >= 6)
    assert report["writable"][0].endswith("scratch") and report["writable"][1].endswith("granted")
    assert "executable" not in report


def test_execution_is_limited_to_the_executable_paths(exec_rights: dict) -> None:
    assert exec_rights["control"]["exec"] == "allowed"
    assert exec_rights["exec"] == {"allowed": "allowed", "denied": "EACCES"}, exec_rights["exec"]
    assert exec_rights["report"]["executable"][0].endswith("allowed")


def test_without_executable_paths_execution_is_not_restricted_by_landlock(rights: dict) -> None:
    # (the seccomp filter is what refuses exec for compiled languages; Landlock only narrows it
    # for the JIT languages that must start their compilers)
    assert rights["control"]["exec"] == "allowed"
    assert rights["exec_unlisted"] == "allowed"


# ---- every layer together, as the candidate process applies them ----------------------------
LAYERS = r'''
import errno, importlib.util, json, os, socket, subprocess, sys, threading, time
from pathlib import Path
spec = importlib.util.spec_from_file_location("_sb", sys.argv[1])
sb = importlib.util.module_from_spec(spec); spec.loader.exec_module(sb)
tmp, spawn = Path(sys.argv[2]), sys.argv[3] == "spawn"
scratch, outside = tmp / "scratch", tmp / "outside"
stop = threading.Event()
threading.Thread(target=stop.wait, daemon=True).start()   # a thread that exists before the sandbox
report = sb.apply_candidate_sandbox(scratch, False, limits={"file_size_bytes": 1 << 20}, spawn=spawn,
                                    executable=[Path("/usr"), Path("/bin"), Path("/lib"), Path("/lib64")])


def attempt(fn):
    try:
        fn()
        return "allowed"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))


modes = []
for task in os.listdir("/proc/self/task"):
    with open(f"/proc/self/task/{task}/status") as fh:
        modes += [int(ln.split()[1]) for ln in fh if ln.startswith("Seccomp:")]
out = {"report": report, "seccomp_modes": modes, "results": {
    "write outside": attempt(lambda: open(outside / "x", "w").write("x")),
    "write scratch": attempt(lambda: open(scratch / "x", "w").write("x")),
    "write /dev/null": attempt(lambda: open("/dev/null", "w").write("x")),
    "file over the size limit": attempt(lambda: open(scratch / "big", "wb").write(b"0" * (2 << 20))),
    "socket": attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM)),
    "subprocess": attempt(lambda: subprocess.run(["true"], check=True)),
    "signal the parent": attempt(lambda: os.kill(os.getppid(), 0)),
}}
print(json.dumps(out))
'''


@pytest.mark.parametrize("spawn", [False, True])
def test_the_candidate_sandbox_applies_every_layer(tmp_path: Path, spawn: bool) -> None:
    if not sandbox.seccomp_supported():
        pytest.skip("this host cannot install seccomp filters")
    (tmp_path / "scratch").mkdir()
    (tmp_path / "outside").mkdir()
    proc = subprocess.run([sys.executable, "-I", "-S", "-c", LAYERS, sandbox.__file__, str(tmp_path),
                           "spawn" if spawn else "strict"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    report, results = out["report"], out["results"]
    assert report["file_size"] == 1 << 20 and report["landlock"] == f"abi {ABI}"
    assert report["seccomp"].startswith("on") and report["processes_while_loading"] is spawn
    assert out["seccomp_modes"] and all(m == 2 for m in out["seccomp_modes"])  # TSYNC: the earlier thread too
    assert results["write outside"] in REFUSED and results["write scratch"] == "allowed"
    assert results["write /dev/null"] == "allowed" and "/dev/null" in report["writable"]
    assert results["file over the size limit"] == "EFBIG"
    assert results["socket"] == "EPERM"
    assert results["subprocess"] == ("allowed" if spawn else "EPERM")
    if ABI >= 6:
        assert results["signal the parent"] == "EPERM"  # scoped and filtered
    assert ("clone without CLONE_THREAD or with CLONE_VFORK" in report["denied"]) is not spawn
    assert ("execve" in report["denied"]) is not spawn and "ptrace" in report["denied"]
