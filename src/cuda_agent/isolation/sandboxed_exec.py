"""Run one toolchain command (compiler, assembler, linker) on hostile sources, confined.

    python -I -S sandboxed_exec.py SPEC_JSON -- COMMAND ...

SPEC_JSON: {"read": [...], "list": [...], "write": [...], "memory_bytes": N, "cpu_seconds": N,
"file_bytes": N}. In order: dies with its parent, rlimits (address space, CPU, file size, no core),
Landlock (read/execute only `read`, names of `list`, write only `write`, no TCP), the syscall
filter that still lets processes start (compiler drivers fork cc1/as/ld; no sockets, no
namespaces, no ptrace), then exec. Started with `-I -S` and loading `sandbox.py` by path, so
nothing from the working directory, the environment or site-packages runs first (~20 ms).
Exit status 125 with one line on stderr when the sandbox could not be applied: the build then
fails as an infrastructure fault, never runs unconfined.
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
import os
import resource
import signal
import sys

SANDBOX_FAILED = 125


def main(argv: list[str]) -> None:
    if len(argv) < 4 or argv[2] != "--":
        sys.stderr.write("usage: sandboxed_exec.py SPEC_JSON -- COMMAND ...\n")
        os._exit(2)
    spec = json.loads(argv[1])
    cmd = argv[3:]
    try:
        ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        for res, value in ((resource.RLIMIT_CORE, 0), (resource.RLIMIT_AS, spec.get("memory_bytes")),
                           (resource.RLIMIT_CPU, spec.get("cpu_seconds")),
                           (resource.RLIMIT_FSIZE, spec.get("file_bytes"))):
            if value is not None:
                hard = resource.getrlimit(res)[1]
                value = int(value) if hard == resource.RLIM_INFINITY else min(int(value), hard)
                resource.setrlimit(res, (value, value))
        here = os.path.dirname(os.path.abspath(__file__))
        mod_spec = importlib.util.spec_from_file_location("_build_sandbox", os.path.join(here, "sandbox.py"))
        assert mod_spec is not None and mod_spec.loader is not None
        sandbox = importlib.util.module_from_spec(mod_spec)
        mod_spec.loader.exec_module(sandbox)
        sandbox.restrict_filesystem(spec.get("read", []), spec.get("write", []), spec.get("list", []))
        seccomp = sandbox.deny_syscalls(allow_processes=True)
        if not str(seccomp.get("seccomp", "")).startswith("on") and spec.get("require_seccomp", True):
            raise OSError(f"syscall filter: {seccomp.get('seccomp')}")
    except Exception as exc:  # noqa: BLE001 -- any failure means: do not run unconfined
        sys.stderr.write(f"build sandbox could not be applied: {exc}\n")
        os._exit(SANDBOX_FAILED)
    try:
        os.execvp(cmd[0], cmd)
    except OSError as exc:
        sys.stderr.write(f"{cmd[0]}: {exc.strerror}\n")
        os._exit(127)


if __name__ == "__main__":
    main(sys.argv)
