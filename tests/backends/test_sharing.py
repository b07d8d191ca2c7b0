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
