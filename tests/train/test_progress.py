"""Progress a person can read (issue 26): the phase clock's arithmetic, the step line's fields,
and the heartbeat that names a stalled phase. Fast: no model, no trainer run (test_trl.py checks
the lines of a real tiny run)."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from cuda_agent.train.progress import PhaseClock, make_progress_callback, step_line


class FakeTime:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_clock_splits_a_step_into_phases_and_update_is_the_rest():
    t = FakeTime()
    clock = PhaseClock(clock=t)
    clock.start_step(1, 20)
    with clock.phase("rollout", "8 episodes"):
        with clock.phase("generation", "turn 1"):
            t.t += 6.0
            assert clock.current() == ("generation", "turn 1", 6.0)
        clock.add_tokens(800)
        with clock.phase("tools", "bash in episode 3"):
            t.t += 2.0
        with clock.phase("evaluation", "judging 8 workspaces"):
            t.t += 3.0
        t.t += 0.5  # tokenising, scoring
    assert clock.current() == ("update", "log-probabilities, loss, backward, optimizer step", 0.0)
    t.t += 1.5
    assert clock.current()[2] == 1.5  # since the rollout ended, not since the step began
    got = clock.take()
    assert got == {"time/generation_s": 6.0, "time/tools_s": 2.0, "time/evaluation_s": 3.0,
                   "time/rollout_other_s": 0.5, "time/update_s": 1.5, "time/step_s": 13.0, "tokens/generated": 800.0}
    assert clock.current() is None  # between steps: the heartbeat has nothing to say
    clock.start_step(2, 20)
    t.t += 0.7
    assert clock.take()["time/update_s"] == 0.7 and clock.take()["tokens/generated"] == 0  # counters reset


def test_episode_numbers_restart_with_each_batch():
    clock = PhaseClock()
    assert [clock.new_episode() for _ in range(3)] == [1, 2, 3]
    clock.new_batch()
    assert clock.new_episode() == 1


def test_step_line_has_reward_pass_rate_tokens_and_seconds_by_phase():
    logs = {"env/episodes": 8.0, "env/reward_mean": 0.25, "env/reward_max": 2.0, "env/pass_rate": 0.375,
            "tokens/generated": 5120.0, "time/generation_s": 12.1, "time/tools_s": 3.2, "time/evaluation_s": 8.04,
            "time/rollout_other_s": 0.4, "time/update_s": 0.6, "time/step_s": 24.34, "loss": 0.0123}
    line = step_line(3, 40, logs, elapsed_s=75.2)
    assert line == ("[rl] step 3/40 | reward mean +0.25 max +2 | pass 3/8 | tokens 5,120 | "
                    "s: gen 12.1 tools 3.2 eval 8.0 other 0.4 update 0.6 = 24.3 | loss 0.0123 | elapsed 75s")
    no_rollout = step_line(4, 40, {"time/update_s": 0.5, "time/step_s": 0.5, "loss": 0.01})
    assert "no new rollouts" in no_rollout and "tokens 0" in no_rollout and "update 0.5 = 0.5" in no_rollout


def test_callback_prints_the_step_line_from_logged_metrics_and_only_those():
    pytest.importorskip("transformers")
    lines: list[str] = []
    clock = PhaseClock()
    cb = make_progress_callback(clock, heartbeat_s=0, emit=lines.append)
    state = SimpleNamespace(global_step=0, max_steps=2)
    cb.on_train_begin(None, state, None)
    cb.on_step_begin(None, state, None)
    state.global_step = 1
    cb.on_log(None, state, None, logs={"loss": 0.5, **clock.take()})
    cb.on_log(None, state, None, logs={"eval_loss": 0.1})  # an evaluation log is not a step
    cb.close()
    assert len(lines) == 1 and lines[0].startswith("[rl] step 1/2 | no new rollouts")


def test_heartbeat_names_the_stalled_phase_its_detail_and_how_long():
    pytest.importorskip("transformers")
    lines: list[str] = []
    clock = PhaseClock()
    cb = make_progress_callback(clock, heartbeat_s=0.3, emit=lines.append)
    state = SimpleNamespace(global_step=4, max_steps=20)
    cb.on_train_begin(None, state, None)
    cb.on_step_begin(None, state, None)
    try:
        with clock.phase("generation", "turn 2: 8 episodes, up to 1024 new tokens each"):
            deadline = time.monotonic() + 10
            while not lines and time.monotonic() < deadline:
                time.sleep(0.05)
    finally:
        cb.close()
    assert lines, "no heartbeat while a phase ran for longer than heartbeat_s"
    assert lines[0].startswith("[rl] step 5/20 still in generation for ")
    assert lines[0].endswith("s: turn 2: 8 episodes, up to 1024 new tokens each")
    n = len(lines)
    time.sleep(0.5)
    assert len(lines) == n  # closed: the thread is gone
