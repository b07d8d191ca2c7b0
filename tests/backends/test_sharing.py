"""The CPU arena the judge shares with a candidate: sealed at its size, so a candidate that
shrinks it cannot crash the judge with SIGBUS (a red-team attack did)."""

from __future__ import annotations

import os

import pytest

from cuda_agent.backends.sharing import memfd_arena


def test_the_arena_cannot_be_shrunk_or_grown():
    fd, mm, raw = memfd_arena(4096)
    try:
        raw.fill_(7)
        for size in (0, 1 << 20):
            with pytest.raises(PermissionError):
                os.ftruncate(fd, size)
        assert int(raw.sum()) == 7 * 4096  # the judge's view still reads
    finally:
        del raw
        mm.close()
        os.close(fd)


def test_an_arena_dropped_without_close_gives_its_memory_back() -> None:
    """Red team round 7: an evaluation that failed before its arena was handed on left the memfd
    open in the judge for good (64 MiB of host memory each time)."""
    import gc
    import os

    from cuda_agent.backends import get_backend

    arena = get_backend("cpu").make_arena(1 << 20)
    fd = arena.fds[0]
    os.fstat(fd)
    del arena
    gc.collect()
    with pytest.raises(OSError):
        os.fstat(fd)
    closed = get_backend("cpu").make_arena(1 << 20)
    closed.close()
    closed.close()  # twice: nothing closed twice (its number may be another file's by then)
    assert closed.fds == []


def test_one_clients_output_never_names_memory_another_clients_output_did() -> None:
    """Red team round 23, F1: the judge maps every client's output memory in one table, and a mapping
    already made was reused for whoever named its handle. A candidate that named the baseline client's
    output memory would have been read as computing eager's outputs. A handle is its first namer's."""
    from cuda_agent.backends.sharing import CudaIpc, SharingError

    ipc = CudaIpc.__new__(CudaIpc)  # its tables only: no device here
    ipc._exported, ipc._opened, ipc._owner = {}, {"ab" * 64: (4096, 1 << 20)}, {"ab" * 64: 101}
    assert ipc.open("ab" * 64, 101) == (4096, 1 << 20)  # the baseline's own output, named again by it
    assert ipc.open("ab" * 64) == (4096, 1 << 20)  # (the client side, which names no owner)
    with pytest.raises(SharingError, match="another client"):
        ipc.open("ab" * 64, 202)  # the candidate naming it
    ipc._exported, ipc._claims = {8192: ("cd" * 64, 1 << 21)}, {}  # an arena the judge laid out
    ipc.claim("cd" * 64, 101)  # the baseline's
    assert ipc.open("cd" * 64, 101) == (8192, 1 << 21)  # its output a view of its input: read where it is
    with pytest.raises(SharingError, match="another client"):
        ipc.open("cd" * 64, 202)  # the candidate naming the baseline's arena
