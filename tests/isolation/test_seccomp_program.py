"""The candidate's syscall filter, read as the kernel reads it: a small classic-BPF interpreter
runs `seccomp_program` on synthetic `struct seccomp_data` for every rule (each denied call by
its number from the kernel's table, clone's flags, signals and targets, terminal ioctls,
foreign ABIs) and checks the verdict. Pure Python, milliseconds; the same program on a real
kernel is tests/isolation/test_sandbox.py. Numbers here are written out (x86-64 from
asm/unistd_64.h, aarch64 from asm-generic/unistd.h), not read from the module under test."""

from __future__ import annotations

import errno

import pytest

from cuda_agent.isolation.sandbox import seccomp_program

ALLOW, KILL = 0x7FFF0000, 0x80000000
EPERM, ENOSYS = 0x00050000 | errno.EPERM, 0x00050000 | errno.ENOSYS
AUDIT_X86_64, AUDIT_AARCH64, AUDIT_I386 = 0xC000003E, 0xC00000B7, 0x40000003
OWN = 4242


def run(prog: list[tuple[int, int, int, int]], nr: int, args: tuple[int, ...] = (), arch: int = AUDIT_X86_64) -> int:
    """Classic BPF as seccomp runs it: A = 32-bit loads from seccomp_data; jumps relative."""
    words = {0: nr & 0xFFFFFFFF, 4: arch}
    for i, a in enumerate(args):
        words[16 + 8 * i] = a & 0xFFFFFFFF
        words[20 + 8 * i] = (a >> 32) & 0xFFFFFFFF
    acc, pc = 0, 0
    for _ in range(10_000):
        code, jt, jf, k = prog[pc]
        pc += 1
        if code == 0x20:    # BPF_LD | BPF_W | BPF_ABS
            acc = words.get(k, 0)
        elif code == 0x15:  # BPF_JMP | BPF_JEQ | BPF_K
            pc += jt if acc == k else jf
        elif code == 0x35:  # BPF_JGE
            pc += jt if acc >= k else jf
        elif code == 0x45:  # BPF_JSET
            pc += jt if acc & k else jf
        elif code == 0x05:  # BPF_JA
            pc += k
        elif code == 0x06:  # BPF_RET | BPF_K
            return k
        else:
            raise AssertionError(f"unexpected instruction {code:#x}")
    raise AssertionError("the filter does not terminate")


@pytest.fixture(scope="module")
def x86() -> list:
    return seccomp_program("x86_64", OWN)


@pytest.fixture(scope="module")
def x86_loading() -> list:
    return seccomp_program("x86_64", OWN, allow_processes=True)


# every group of denied calls, with the attack each one stops
DENIED_X86 = {
    # sockets (new ones; inherited fds stay usable)
    "socket": 41, "socketpair": 53, "connect": 42, "bind": 49, "listen": 50, "accept": 43, "accept4": 288,
    # other processes' memory and fds
    "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "pidfd_open": 434, "pidfd_getfd": 438,
    "pidfd_send_signal": 424, "kcmp": 312, "process_madvise": 440, "process_mrelease": 448,
    # mounts and namespaces
    "mount": 165, "umount2": 166, "unshare": 272, "setns": 308, "pivot_root": 155, "chroot": 161,
    "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
    "mount_setattr": 442,
    # new processes
    "execve": 59, "execveat": 322, "fork": 57, "vfork": 58, "tkill": 200,
    # keys, BPF, perf, io_uring (it would bypass the filter), userfaultfd, handles, device nodes
    "keyctl": 250, "add_key": 248, "request_key": 249, "bpf": 321, "perf_event_open": 298,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "userfaultfd": 323,
    "open_by_handle_at": 304, "name_to_handle_at": 303, "mknod": 133, "mknodat": 259,
    # the kernel, clocks, credentials
    "swapon": 167, "swapoff": 168, "reboot": 169, "kexec_load": 246, "kexec_file_load": 320, "init_module": 175,
    "finit_module": 313, "delete_module": 176, "iopl": 172, "ioperm": 173, "acct": 163, "settimeofday": 164,
    "clock_settime": 227, "clock_adjtime": 305, "adjtimex": 159, "setuid": 105, "setgid": 106, "setreuid": 113,
    "setregid": 114, "setresuid": 117, "setresgid": 119, "setfsuid": 122, "setfsgid": 123, "setgroups": 116,
    "capset": 126, "personality": 135, "quotactl": 179, "vhangup": 153, "syslog": 103, "sethostname": 170,
    "setdomainname": 171, "migrate_pages": 256, "uselib": 134, "lookup_dcookie": 212,
    # scheduling and I/O priority (red team: renicing the baseline client)
    "setpriority": 141, "sched_setscheduler": 144, "sched_setparam": 142, "sched_setattr": 314, "ioprio_set": 251,
    "move_pages": 279,
    # leaving the judge's process group (it would run while frozen)
    "setpgid": 109, "setsid": 112,
    # file metadata, which Landlock does not cover
    "chmod": 90, "fchmod": 91, "fchmodat": 268, "fchmodat2": 452, "chown": 92, "fchown": 93, "lchown": 94,
    "fchownat": 260, "setxattr": 188, "lsetxattr": 189, "fsetxattr": 190, "setxattrat": 463, "removexattr": 197,
    "lremovexattr": 198, "fremovexattr": 199, "removexattrat": 466, "utime": 132, "utimes": 235,
    "futimesat": 261, "utimensat": 280,
    # System V IPC: objects that outlive the process (red team round 5, s1)
    "shmget": 29, "shmat": 30, "shmctl": 31, "shmdt": 67, "semget": 64, "semop": 65, "semctl": 66,
    "semtimedop": 220, "msgget": 68, "msgsnd": 69, "msgrcv": 70, "msgctl": 71,
    "mq_open": 240, "mq_unlink": 241, "mq_timedsend": 242, "mq_timedreceive": 243, "mq_notify": 244,
    "mq_getsetattr": 245,
}
ALLOWED_X86 = {"read": 0, "write": 1, "openat": 257, "close": 3, "mmap": 9, "munmap": 11, "mprotect": 10,
               "futex": 202, "getpid": 39, "gettid": 186, "clock_gettime": 228, "nanosleep": 35,
               "sched_yield": 24, "sched_getaffinity": 204, "getrlimit": 97, "exit_group": 231, "exit": 60,
               "madvise": 28, "brk": 12, "sendmsg": 46, "recvmsg": 47, "fstat": 5, "getrusage": 98,
               "memfd_create": 319, "rt_sigaction": 13}
PROCESS_CALLS = {"execve", "execveat", "fork", "vfork", "chmod", "fchmod", "fchmodat", "fchmodat2", "utime",
                 "utimes", "futimesat", "utimensat"}

CLONE_VM, CLONE_FS, CLONE_FILES, CLONE_SIGHAND = 0x100, 0x200, 0x400, 0x800
CLONE_THREAD, CLONE_VFORK, SIGCHLD = 0x10000, 0x4000, 17
PTHREAD = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | 0x80000 | 0x100000 | 0x200000
NAMESPACES = {"NEWNS": 0x20000, "NEWCGROUP": 0x2000000, "NEWUTS": 0x4000000, "NEWIPC": 0x8000000,
              "NEWUSER": 0x10000000, "NEWPID": 0x20000000, "NEWNET": 0x40000000}


@pytest.mark.parametrize("name", sorted(DENIED_X86))
def test_each_denied_call_answers_eperm(x86: list, name: str) -> None:
    assert run(x86, DENIED_X86[name]) == EPERM


@pytest.mark.parametrize("name", sorted(ALLOWED_X86))
def test_ordinary_calls_are_allowed(x86: list, name: str) -> None:
    assert run(x86, ALLOWED_X86[name]) == ALLOW


def test_clone_makes_threads_only(x86: list) -> None:
    assert run(x86, 56, (PTHREAD,)) == ALLOW
    assert run(x86, 56, (SIGCHLD,)) == EPERM                        # fork through clone
    assert run(x86, 56, (CLONE_VM | CLONE_VFORK | SIGCHLD,)) == EPERM  # posix_spawn's vfork
    assert run(x86, 56, (PTHREAD | CLONE_VFORK,)) == EPERM          # a vfork-style thread (red team round 2)
    for flag in NAMESPACES.values():
        assert run(x86, 56, (PTHREAD | flag,)) == EPERM
    assert run(x86, 435) == ENOSYS  # clone3: glibc falls back to clone, which the filter can read


def test_the_loading_variant_allows_processes_but_never_namespaces(x86_loading: list) -> None:
    assert run(x86_loading, 56, (SIGCHLD,)) == ALLOW
    assert run(x86_loading, 56, (CLONE_VM | CLONE_VFORK | SIGCHLD,)) == ALLOW
    for name, flag in NAMESPACES.items():
        assert run(x86_loading, 56, (SIGCHLD | flag,)) == EPERM, name
    for name in PROCESS_CALLS:
        assert run(x86_loading, DENIED_X86[name]) == ALLOW, name
    for name in set(DENIED_X86) - PROCESS_CALLS:
        assert run(x86_loading, DENIED_X86[name]) == EPERM, name
    assert run(x86_loading, 435) == ENOSYS


@pytest.mark.parametrize("name,nr", [("kill", 62), ("tgkill", 234), ("rt_sigqueueinfo", 129),
                                     ("rt_tgsigqueueinfo", 297)])
def test_signals_only_to_itself(x86: list, name: str, nr: int) -> None:
    assert run(x86, nr, (OWN, 19)) == ALLOW
    assert run(x86, nr, (OWN + 1, 19)) == EPERM      # the judge, the baseline client
    assert run(x86, nr, (0, 19)) == EPERM            # its process group (the judge's freeze shares it)
    assert run(x86, nr, (-1 & 0xFFFFFFFF, 9)) == EPERM  # every process it may signal


def test_limits_only_of_itself(x86: list) -> None:
    assert run(x86, 302, (0,)) == ALLOW
    assert run(x86, 302, (OWN,)) == ALLOW
    assert run(x86, 302, (OWN + 1,)) == EPERM


@pytest.mark.parametrize("target", [0, OWN, OWN + 1])
def test_no_cpu_affinity_at_all(x86: list, target: int) -> None:
    # not even its own: the judge pins both timed clients to one core on a GPU (a candidate that
    # moved to a quieter core would beat a baseline that cannot); a red team once pinned the baseline
    assert run(x86, 203, (target,)) == EPERM


def test_terminal_injection_ioctls_are_refused(x86: list) -> None:
    assert run(x86, 16, (0, 0x5412)) == EPERM  # TIOCSTI
    assert run(x86, 16, (0, 0x541C)) == EPERM  # TIOCLINUX
    assert run(x86, 16, (0, 0x541B)) == ALLOW  # FIONREAD
    assert run(x86, 16, (5, 0xC0104601)) == ALLOW  # a driver's ioctl (the GPU's go through ioctl)


def test_inode_flag_freeze_and_lease_calls_are_refused(x86: list) -> None:
    """Red team rounds 9 (i1) and 10 (f1): a root candidate, or one that owns the files it reads,
    set inode flags (immutable, sync, nodump), changed the inode generation and took a read lease
    that blocked other processes' opens, all on read-only fds that Landlock does not cover."""
    for cmd in (0x40086602, 0x40046602, 0x40087602, 0x401C5820, 0xC0045877, 0x8004587D, 0x40086604):  # + ext4's own
        assert run(x86, 16, (3, cmd)) == EPERM, hex(cmd)  # FS_IOC_SETFLAGS, SETVERSION, FSSETXATTR, FIFREEZE, SHUTDOWN
    assert run(x86, 16, (3, 0x80086601)) == ALLOW  # FS_IOC_GETFLAGS: reading them is harmless
    assert run(x86, 72, (3, 1024)) == EPERM  # fcntl F_SETLEASE
    assert run(x86, 72, (3, 1026)) == EPERM  # fcntl F_NOTIFY
    for cmd in (1, 2, 3, 4, 6, 1030):  # F_GETFD, F_SETFD, F_GETFL, F_SETFL, F_SETLK, F_DUPFD_CLOEXEC
        assert run(x86, 72, (3, cmd)) == ALLOW, cmd
    assert run(seccomp_program("aarch64", OWN), 25, (3, 1024), arch=AUDIT_AARCH64) == EPERM
    assert run(seccomp_program("aarch64", OWN), 29, (3, 0x40086602), arch=AUDIT_AARCH64) == EPERM


def test_newer_flag_calls_self_resuming_signals_and_batched_io_are_refused(x86: list) -> None:
    """Red team round 12: file_setattr (Linux 6.17) set flags on a host directory past the ioctl
    refusals (f1); a timer whose signal was SIGCONT resumed the frozen candidate (s1; F_SETSIG the
    same through I/O); one io_submit did a whole batch's gathers after "done" (u2)."""
    for nr in (469, 443, 222, 206, 209, 253, 294, 300, 301):  # file_setattr, quotactl_fd, timer_create, AIO, inotify, fanotify
        assert run(x86, nr) == EPERM, nr
    assert run(x86, 72, (3, 10)) == EPERM  # fcntl F_SETSIG
    for nr in (468, 283, 286, 284):  # file_getattr (reading), timerfd_create, timerfd_settime, eventfd: no signal
        assert run(x86, nr) == ALLOW, nr
    aarch64 = seccomp_program("aarch64", OWN)
    for nr in (469, 107, 0, 2, 26):  # file_setattr, timer_create, io_setup, io_submit, inotify_init1
        assert run(aarch64, nr, arch=AUDIT_AARCH64) == EPERM, nr


def test_the_parent_death_signal_stays_the_sandboxs(x86: list) -> None:
    """Red team round 28: prctl(PR_SET_PDEATHSIG, SIGCONT or 0) replaced the SIGKILL the sandbox set,
    so a candidate could outlive a judge that died. Other prctl calls stay allowed (thread names, the
    speculation controls torch and the driver read)."""
    assert run(x86, 157, (1, 18)) == EPERM  # PR_SET_PDEATHSIG
    for option in (2, 15, 16, 38, 52):  # PR_GET_PDEATHSIG, PR_SET_NAME, PR_GET_NAME, NO_NEW_PRIVS, GET_SPECULATION_CTRL
        assert run(x86, 157, (option, 0)) == ALLOW, option
    assert run(seccomp_program("aarch64", OWN), 167, (1, 18), arch=AUDIT_AARCH64) == EPERM


def test_foreign_abis_kill_the_process(x86: list) -> None:
    assert run(x86, 0, arch=AUDIT_I386) == KILL             # int 0x80 from a 64-bit process
    assert run(x86, 41, arch=AUDIT_I386) == KILL
    assert run(x86, 0x40000000 | 41) == KILL               # the x32 ABI
    assert run(x86, 0x40000000) == KILL


def test_the_aarch64_filter(x86: list) -> None:
    prog = seccomp_program("aarch64", OWN)
    for name, nr in {"socket": 198, "connect": 203, "ptrace": 117, "execve": 221, "unshare": 97, "mount": 40,
                     "setpriority": 140, "setpgid": 154, "fchmodat": 53, "bpf": 280, "io_uring_setup": 425}.items():
        assert run(prog, nr, arch=AUDIT_AARCH64) == EPERM, name
    for name, nr in {"read": 63, "write": 64, "openat": 56, "futex": 98, "mmap": 222}.items():
        assert run(prog, nr, arch=AUDIT_AARCH64) == ALLOW, name
    assert run(prog, 220, (PTHREAD,), arch=AUDIT_AARCH64) == ALLOW
    assert run(prog, 220, (SIGCHLD,), arch=AUDIT_AARCH64) == EPERM
    assert run(prog, 129, (OWN + 1, 9), arch=AUDIT_AARCH64) == EPERM   # kill
    assert run(prog, 122, (OWN + 1,), arch=AUDIT_AARCH64) == EPERM     # sched_setaffinity
    assert run(prog, 29, (0, 0x5412), arch=AUDIT_AARCH64) == EPERM     # ioctl TIOCSTI
    assert run(prog, 63, arch=AUDIT_X86_64) == KILL                    # the other architecture's ABI
    assert run(prog, 435, arch=AUDIT_AARCH64) == ENOSYS


def test_hot_calls_are_answered_early(x86: list) -> None:
    # futex and mmap are allowed within the first few dozen instructions (a long walk per
    # syscall cost a small CPU op ~25%): the allow for them comes before any deny rule
    first_eperm = next(i for i, ins in enumerate(x86) if ins == (0x06, 0, 0, EPERM))
    first_allow = next(i for i, ins in enumerate(x86) if ins == (0x06, 0, 0, ALLOW))
    assert first_allow < first_eperm
