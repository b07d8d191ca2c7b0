"""t2: round 15's p2 (a row flip whose batch's last HIDE calls are finished by one page-cache preadv on a helper,
in a library that keeps POOL idle threads), changed for the look before the signal: the helper now sleeps
(clock_nanosleep, ABSTIME) from the batch's last call for DELAY_US, so it is asleep at the judge's look, and enters
the preadv just before the SIGSTOP: the copy then runs on after the signal inside the stop leaders' allowance
(100 us + 3 us x threads of CPU at HEAD; 1.5 us before). The delay adapts: woken late (stopped in its sleep) ->
-LATE_STEP; copy finished unstopped (too early) -> +EARLY_STEP; stopped mid-copy -> kept.
Usage: python t2_timed_preadv.py POOL MODE[,MODE...] ROWS COLS HIDE   (env RT30_DELAY_US, default 29000)"""
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import common  # noqa: E402  (this round's driver; must precede round 15's folder on the path)

sys.path.insert(1, str(HERE.parent / "issue24_round15"))
import p1_pool_allowance as p1  # noqa: E402
import p2_one_preadv as p2  # noqa: E402

DELAY = os.environ.get("RT30_DELAY_US", "29000")
src = p2.ATTACK_BINDING
old_helper = src[src.index("void* helper(void*) {"):src.index("void find_arena()")]
new_helper = r'''long now_ns();
long delay_ns = DELAYV * 1000L, deadline = 0, dbg_hits = 0, dbg_late = 0, dbg_early = 0;
long tcpu() { struct Ts { long s, ns; } ts; S(228, 3L /*CLOCK_THREAD_CPUTIME_ID*/, &ts); return ts.s * 1000000000L + ts.ns; }
void* helper(void*) {
  for (;;) {
    while (word.load() == 0) S(202, &word, 0L /*FUTEX_WAIT*/, 0L, nullptr);
    long dl = deadline;
    entered.store(1);
    if (dl) { struct Ts { long s, ns; } ts = {dl / 1000000000L, dl % 1000000000L};
      while (S(230, 1L /*CLOCK_MONOTONIC*/, 1L /*TIMER_ABSTIME*/, &ts, nullptr) != 0) {} }
    long tw = now_ns(), c0 = tcpu();
    S(295, (long)arena_fd, iov, niov, iov_off);                                 // preadv: the batch's flips, in the kernel
    long te = now_ns(), c1 = tcpu();
    if (dl) {
      if (tw - dl > 400000) { delay_ns -= LATEV; ++dbg_late; }                  // stopped in its sleep: too late
      else if ((te - tw) - (c1 - c0) > 1000000) { ++dbg_hits; }                 // stopped mid-copy
      else { delay_ns += EARLYV; ++dbg_early; }                                 // done before the stop: too early
    }
    word.store(0);
  }
  return nullptr;
}
'''.replace("DELAYV", DELAY).replace("LATEV", os.environ.get("RT30_LATE_STEP_NS", "600000")).replace(
    "EARLYV", os.environ.get("RT30_EARLY_STEP_NS", "150000"))
src = src.replace(old_helper, new_helper)
# fire(): the batch's last call (batch size known) arms the deadline; every other fire copies at once
src = src.replace("  entered.store(0); word.store(1);", "  deadline = timed ? now_ns() + delay_ns : 0;\n  entered.store(0); word.store(1);")
src = src.replace("void fire() {", "void fire(bool timed = false) {")
src = src.replace("long tF = now_ns(); fire();", "long tF = now_ns(); fire(burst_prev > 1 && burst >= burst_prev);")
src = src.replace('"rt15 burst=%d prev=%d first->fire=%ldus alloc=%ldus fire=%ldus\\n", burst, burst_prev, (tF - dbg_first) / 1000, dbg_alloc / 1000, (now_ns() - tF) / 1000',
                  '"rt30 delay=%ldus hits=%ld late=%ld early=%ld\\n", delay_ns / 1000, dbg_hits, dbg_late, dbg_early')
assert "fire(burst_prev > 1" in src and "deadline = timed" in src and "rt30 delay" in src


def main() -> None:
    cfg = common.config(fast=False)
    try:
        for mode in p1.MODES:
            binding = src if mode == "attack" else p1.HONEST_BINDING
            ws = common.workspace(f"t2{mode}{p1.POOL}", model_new=p1.MODEL_NEW, task_source=p1.TASK,
                                  kernels={"flip_binding.cpp": binding})
            common.run("t2_timed_preadv", f"{mode} pool={p1.POOL} {p1.ROWS}x{p1.COLS} hide={p2.HIDE} delay0={DELAY}us", ws, cfg,
                       deserved="1 (a copy as fast as eager's)" if mode == "attack" else "1", pool=p1.POOL, mode=mode,
                       log_chars=int(os.environ.get("RT30_LOGCHARS", "600")))
    finally:
        common.shutdown()


if __name__ == "__main__":
    main()
