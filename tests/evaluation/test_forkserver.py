"""Client processes forked from the fork server are set up like ones started anew: their own
session, scratch dir, environment, log and (where the host allows) network namespace; the
judge learns how they ended although it is not their parent; they die with the server; and a
server that is gone or refuses leaves the judge starting clients the old way."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from cuda_agent.evaluation.candidate_link import CandidateDied, CandidateLink, ForkedProcess, ForkServer
from cuda_agent.evaluation.judge import _candidate_env
from cuda_agent.isolation.sandbox import namespaces_available


@pytest.fixture(scope="module")
def server():
    fs = ForkServer("cpu", _candidate_env())
    assert fs.ready(180), fs.log_tail()
    yield fs
    fs.close()


def test_a_forked_client_is_set_up_like_a_started_one(server):
    link = CandidateLink("cpu", _candidate_env(), isolate=True, confine_writes=True, forkserver=server)
    try:
        link.await_started(time.monotonic() + 60)
        assert link.forked and isinstance(link.proc, ForkedProcess)
        pid = link.pid()
        assert pid == link.proc.pid and os.getsid(pid) == pid  # its own session: one signal reaches all of it
        assert Path(f"/proc/{pid}/cwd").resolve() == link.scratch.resolve()
        if namespaces_available():
            assert os.readlink(f"/proc/{pid}/ns/net") != os.readlink("/proc/self/ns/net")
        # writes confined before anything else ran in it (Landlock), as in a client started anew
        status = Path(f"/proc/{pid}/status").read_text()
        assert "NoNewPrivs:\t1" in status
    finally:
        link.close()


def test_the_judge_learns_how_a_forked_client_ended(server):
    calm = CandidateLink("cpu", _candidate_env(), isolate=False, confine_writes=False, forkserver=server)
    try:
        calm.await_started(time.monotonic() + 60)
        calm.send({"type": "not needed"})  # a spare sent away exits with status 0
        assert calm.proc.wait(timeout=20) == 0
    finally:
        calm.close()
    link = CandidateLink("cpu", _candidate_env(), isolate=False, confine_writes=False, forkserver=server)
    try:
        link.await_started(time.monotonic() + 60)
        os.kill(link.proc.pid, signal.SIGSEGV)
        assert link.proc.wait(timeout=20) == -signal.SIGSEGV
        with pytest.raises(CandidateDied, match="segmentation fault"):
            link.receive(time.monotonic() + 5, "running")
    finally:
        link.close()


def test_a_held_client_starts_its_driver_and_waits_to_be_told_to_go(server):
    """A spare forked for a later evaluation says "held" and starts nothing more (on a GPU: no
    device context, so no device memory) until the judge says go; then it starts as any spare,
    and one the judge no longer needs exits quietly."""
    link = CandidateLink("cpu", _candidate_env(), isolate=False, confine_writes=False, forkserver=server, held=True)
    try:
        assert link.held
        link.await_held(time.monotonic() + 60)
        assert link.driver_up
        with pytest.raises(CandidateDied, match="held"):
            link.await_started(time.monotonic() + 1)  # nothing to wait for until it is told to go
        time.sleep(0.5)
        assert not link.started() and link.alive()
        link.go()
        time.sleep(0.5)  # the judge reads "spare" when it takes the spare: its start is timed by its own steps
        link.await_started(time.monotonic() + 60)
        assert link.started() and not link.held
        assert link.up_after_go_s is not None and 0 <= link.up_after_go_s < 0.4  # (a CPU's "device": nothing)
        link.send({"type": "not needed"})
        assert link.proc.wait(timeout=20) == 0
    finally:
        link.close()
    unused = CandidateLink("cpu", _candidate_env(), isolate=False, confine_writes=False, forkserver=server, held=True)
    try:
        unused.await_held(time.monotonic() + 60)
        unused.send({"type": "not needed"})  # sent away while held
        assert unused.proc.wait(timeout=20) == 0
    finally:
        unused.close()


def test_a_held_client_sent_a_request_instead_of_go_comes_up_and_serves_it(server):
    """The judge says go before any request; a held client that gets the request first all the same
    starts its device and serves it (here a request with nothing in it: it answers with an error)."""
    link = CandidateLink("cpu", _candidate_env(), isolate=False, confine_writes=False, forkserver=server, held=True)
    try:
        link.await_held(time.monotonic() + 60)
        link.held = False  # (what `go` records) with no "go" sent
        link.send({"type": "start"})
        link.await_started(time.monotonic() + 60)
        answer = link.receive(time.monotonic() + 60, "loading")
        assert answer.get("type") == "error", answer
    finally:
        link.close()


def test_clients_die_with_their_server_and_the_judge_falls_back():
    fs = ForkServer("cpu", _candidate_env())
    try:
        assert fs.ready(180), fs.log_tail()
        link = CandidateLink("cpu", _candidate_env(), isolate=False, confine_writes=False, forkserver=fs)
        link.await_started(time.monotonic() + 60)
        os.kill(fs.proc.pid, signal.SIGKILL)
        assert link.proc.wait(timeout=20) == -signal.SIGKILL  # PDEATHSIG: no orphan outlives its server
        link.close()
        assert not fs.alive()
        fallback = CandidateLink("cpu", _candidate_env(), isolate=False, confine_writes=False, forkserver=fs)
        try:
            assert not fallback.forked  # a new interpreter, started the old way
            fallback.await_started(time.monotonic() + 120)
            assert fallback.alive()
        finally:
            fallback.close()
    finally:
        fs.close()


def test_a_clients_start_after_go_is_its_steps_after_held_and_nothing_it_cannot_say() -> None:
    from cuda_agent.evaluation.candidate_link import _steps_after

    assert _steps_after({"confine": 0.01, "driver": 0.13, "held": 2.0, "device": 0.3, "harness": 0.01}, "held") == 0.31
    assert _steps_after({"confine": 0.01, "device": 0.3}, "held") is None  # never held
    assert _steps_after({"held": 1.0, "device": "0.3"}, "held") is None  # a claim that is no number
    assert _steps_after({"held": 1.0, "device": float("nan")}, "held") is None
