"""The data worker (`python -m cuda_agent.data.worker FD BACKEND`): runs task code for the
probe, composition and the filters, one JSON request per stdin line ("probe", "synth", "check"),
replies framed on the private pipe FD. data_worker.py is the parent side.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any

from ..isolation import channel


def main() -> None:
    out_fd, backend_name = int(sys.argv[1]), sys.argv[2]
    import torch  # noqa: F401 - imported, and the device's driver started, before Landlock (both write)

    from ..backends import get_backend

    get_backend(backend_name).start_device()
    _isolate()
    while True:
        line = sys.stdin.readline()
        if not line:
            os._exit(0)
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            for reply in _handle(request, backend_name):
                channel.send(out_fd, reply)
        except BaseException as exc:  # noqa: BLE001 - report, keep serving
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                os._exit(1)
            try:
                channel.send(out_fd, {"type": "error", "stage": "worker", "message": _describe(exc)})
            except OSError:
                os._exit(1)


def _handle(request: dict[str, Any], backend_name: str) -> Any:
    op = request.get("op")
    if op == "probe":
        from .catalogue import OpRef
        from .probe import probe_op

        ref = OpRef.model_validate(request["ref"])
        yield {"type": "result", "spec": probe_op(ref.name, ref.kind, ref.library).model_dump(mode="json")}
    elif op == "synth":
        from .synth_worker import synth_candidate

        yield from synth_candidate(request, backend_name, lambda: sys.stdin.readline().strip())
    elif op == "check":
        from .synth_worker import check_source

        yield {"type": "result", "check": check_source(request, backend_name).model_dump(mode="json")}
    else:
        yield {"type": "error", "stage": "worker", "message": f"unknown request {op!r}"}


def _isolate() -> None:
    """Limit what task code can write (Landlock, where the kernel has it), before any threads."""
    from ..isolation.sandbox import apply_limits, restrict_writes

    apply_limits(file_size_bytes=1 << 30, cpu_seconds=None, open_files=None, processes=None, address_space=None)
    if os.environ.get("CUDA_AGENT_DATA_ISOLATE") == "1":
        writable = [Path(os.environ.get("HOME", "/tmp")), Path("/dev")]
        restrict_writes([p for p in writable if p.exists()])


def _describe(exc: BaseException) -> str:
    tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
    return "".join(tb[-3:])[-3000:].strip()


if __name__ == "__main__":
    main()
