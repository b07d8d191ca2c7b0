"""Progress a person can read while RL trains: one line per optimizer step, and a heartbeat while a
phase runs long, naming what it waits for.

`PhaseClock` is the one place a step's time is measured. The trainer and the environment mark
their phases with it (`generation`: the policy's batched `generate` calls; `tools`: the agent's
tool calls; `evaluation`: the judge on final workspaces; `rollout`: all of a batch's generation and
scoring, which holds those three); `update` is what is left of the step (log-probabilities, loss,
backward, optimizer). `ProgressPrinter` is a transformers `TrainerCallback` that prints the step line
from the logged metrics, so the line and `metrics.jsonl` say the same thing.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from typing import Any, Callable, Iterator

PHASES = ("generation", "tools", "evaluation")


class PhaseClock:
    """Seconds per phase of the current step, tokens generated, and what is running now.
    Thread-safe: the heartbeat reads it from its own thread."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._now = clock
        self._lock = threading.Lock()
        self._stack: list[tuple[str, str, float]] = []  # (phase, detail, since), innermost last
        self._totals: dict[str, float] = {}
        self._tokens = 0
        self._episodes = 0
        self._idle_since = 0.0  # when the last outermost phase ended
        self.step_started: float | None = None
        self.step = 0
        self.max_steps = 0
        self.label: str | None = None  # what the heartbeat calls the work when it is not a training step

    # ---- marking ----------------------------------------------------------------------------
    @contextlib.contextmanager
    def phase(self, name: str, detail: str = "") -> Iterator[None]:
        """Time a block as `name`; `detail` is what the heartbeat says it is doing."""
        start = self._now()
        with self._lock:
            self._stack.append((name, detail, start))
        try:
            yield
        finally:
            end = self._now()
            with self._lock:
                self._stack = [s for s in self._stack if s[2] != start or s[0] != name]
                self._totals[name] = self._totals.get(name, 0.0) + end - start
                if not self._stack:
                    self._idle_since = end

    def add_tokens(self, n: int) -> None:
        with self._lock:
            self._tokens += int(n)

    def new_episode(self) -> int:
        """A rollout's number within the current batch (1-based), for messages."""
        with self._lock:
            self._episodes += 1
            return self._episodes

    def new_batch(self) -> None:
        with self._lock:
            self._episodes = 0

    def start_step(self, step: int, max_steps: int) -> None:
        """A step begins; with logging every k steps, the time taken covers all k."""
        with self._lock:
            self.step, self.max_steps = step, max_steps
            if self.step_started is None:
                self.step_started = self._now()

    def where(self) -> str:
        return self.label or f"step {self.step}/{self.max_steps}"

    # ---- reading ----------------------------------------------------------------------------
    def take(self) -> dict[str, float]:
        """The step's time by phase (`time/*_s`) and tokens generated, since the step began;
        resets the counters. `update` = step − rollout; `rollout_other` = rollout − its phases."""
        now = self._now()
        with self._lock:
            totals, tokens = dict(self._totals), self._tokens
            self._totals, self._tokens = {}, 0
            wall = now - self.step_started if self.step_started is not None else totals.get("rollout", 0.0)
            self.step_started = None
        rollout = totals.get("rollout", 0.0)
        inner = sum(totals.get(p, 0.0) for p in PHASES)
        out = {f"time/{p}_s": round(totals.get(p, 0.0), 3) for p in PHASES}
        out["time/rollout_other_s"] = round(max(0.0, rollout - inner), 3)
        out["time/update_s"] = round(max(0.0, wall - rollout), 3)
        out["time/step_s"] = round(wall, 3)
        out["tokens/generated"] = float(tokens)
        return out

    def current(self) -> tuple[str, str, float] | None:
        """(phase, detail, seconds in it) of the innermost running phase; ('update', '', s) when a
        step runs outside any marked phase; None between steps."""
        now = self._now()
        with self._lock:
            if self._stack:
                name, detail, since = self._stack[-1]
                return name, detail, now - since
            if self.step_started is not None:
                since = max(self.step_started, self._idle_since)
                return "update", "log-probabilities, loss, backward, optimizer step", now - since
        return None


def step_line(step: int, max_steps: int, logs: dict[str, Any], elapsed_s: float | None = None) -> str:
    """The one line printed as an optimizer step ends, from the step's logged metrics."""
    parts = [f"[rl] step {step}/{max_steps}"]
    n = logs.get("env/episodes")
    if n:
        passed = round(float(logs.get("env/pass_rate", 0.0)) * n)
        parts.append(f"reward mean {logs['env/reward_mean']:+.2f} max {logs.get('env/reward_max', float('nan')):+.0f}")
        parts.append(f"pass {passed}/{int(n)}")
    else:
        parts.append("no new rollouts (update on the last batch)")
    parts.append(f"tokens {int(logs.get('tokens/generated', 0)):,}")
    t = [f"{label} {logs.get(f'time/{key}_s', 0.0):.1f}" for label, key in
         (("gen", "generation"), ("tools", "tools"), ("eval", "evaluation"), ("other", "rollout_other"),
          ("update", "update"))]
    parts.append("s: " + " ".join(t) + f" = {logs.get('time/step_s', 0.0):.1f}")
    if "loss" in logs:
        parts.append(f"loss {float(logs['loss']):.4g}")
    if elapsed_s is not None:
        parts.append(f"elapsed {elapsed_s:.0f}s")
    return " | ".join(parts)


def make_progress_callback(clock: PhaseClock, *, heartbeat_s: float = 30.0,
                           emit: Callable[[str], None] = functools.partial(print, flush=True)) -> Any:
    """A `TrainerCallback`: marks each step's start on `clock`, prints `step_line` when the step's
    metrics are logged, and runs a heartbeat thread that, when nothing was printed for
    `heartbeat_s` seconds during a step, prints the running phase, its detail and how long."""
    from transformers import TrainerCallback

    class ProgressPrinter(TrainerCallback):
        def __init__(self) -> None:
            self.started = time.monotonic()
            self.last_print = time.monotonic()
            self._stop = threading.Event()
            self._thread: threading.Thread | None = None

        def _say(self, line: str) -> None:
            self.last_print = time.monotonic()
            emit(line)

        def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self.started = self.last_print = time.monotonic()
            if heartbeat_s > 0 and self._thread is None:
                self._stop.clear()
                self._thread = threading.Thread(target=self._beat, name="rl-heartbeat", daemon=True)
                self._thread.start()

        def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            clock.start_step(state.global_step + 1, state.max_steps)

        def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None,
                   **kw: Any) -> None:
            if logs and "time/step_s" in logs:
                self._say(step_line(state.global_step, state.max_steps, logs, time.monotonic() - self.started))

        def close(self) -> None:
            """Stop the heartbeat (the run's end: after training and the held-out measurement)."""
            self._stop.set()
            if self._thread is not None:
                self._thread.join(timeout=2)
                self._thread = None

        def _beat(self) -> None:
            while not self._stop.wait(min(heartbeat_s, 1.0)):
                if time.monotonic() - self.last_print < heartbeat_s:
                    continue
                now = clock.current()
                if now is None:
                    continue
                phase, detail, secs = now
                self._say(f"[rl] {clock.where()} still in {phase} for {secs:.0f}s"
                          + (f": {detail}" if detail else ""))

    return ProgressPrinter()


__all__ = ["PHASES", "PhaseClock", "step_line", "make_progress_callback"]
