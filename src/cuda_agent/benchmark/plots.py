"""The HTML report's figures (matplotlib, the `bench` extra), returned as inline PNG data URIs
so the page is one self-contained file."""

from __future__ import annotations

import base64
import io
import math
import random
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .metrics import FAST_P, MARGIN, fast_p

if TYPE_CHECKING:
    from .report import TaskRow

_REWARD_COLORS = {-1: "#c0392b", 1: "#7f8c8d", 2: "#2980b9", 3: "#27ae60"}


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise RuntimeError("the HTML report's plots need matplotlib: pip install 'cuda-agent[bench]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _data_uri(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    _pyplot().close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


NICE = (0.01, 0.02, 0.05, 0.1, 0.2, 0.25, 0.5, 0.67, 0.8, 0.9, 0.95, 1.0, 1.05, 1.1, 1.25, 1.5, 2.0, 3.0, 4.0,
        5.0, 8.0, 10.0, 20.0, 50.0, 100.0)


def log_ticks(lo: float, hi: float, most: int = 9) -> list[float]:
    """Speedup values to label on a log axis spanning [lo, hi]: always 1x when in range, then
    the nice values in range, thinned evenly (in log space) to at most `most`. A narrow range
    (0.97x-1.03x, a reference run) still gets labelled values rather than no tick at all."""
    lo, hi = min(lo, hi), max(lo, hi)
    inside = [v for v in NICE if lo <= v <= hi]
    if len(inside) < 2:  # narrower than the nice grid: label the ends and the middle
        mid = math.sqrt(lo * hi)
        return sorted({round(lo, 3), round(mid, 3), round(hi, 3)} | ({1.0} if lo <= 1 <= hi else set()))
    if len(inside) > most:  # the nice value nearest each of `most` points evenly spaced in log space
        a, b = math.log(inside[0]), math.log(inside[-1])
        targets = [a + (b - a) * i / (most - 1) for i in range(most)]
        keep = {min(inside, key=lambda v: abs(math.log(v) - t)) for t in targets}
        if 1.0 in inside and 1.0 not in keep:  # 1x replaces its nearest neighbour
            keep.discard(min(keep, key=lambda v: abs(math.log(v))))
            keep.add(1.0)
        inside = sorted(keep)
    return inside


def _times_axis(ax: Any, which: str) -> None:
    """Label a log-2 speedup axis with values (0.8x, 1x, 1.25x, ...) rather than 2^-1, 2^0 or
    nothing: matplotlib's log locator puts ticks only at powers of the base, so a range
    inside one octave would carry no label."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    axis = ax.yaxis if which == "y" else ax.xaxis
    lo, hi = ax.get_ylim() if which == "y" else ax.get_xlim()
    axis.set_major_locator(FixedLocator(log_ticks(lo, hi)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
    axis.set_minor_formatter(NullFormatter())


def speedup_distribution(rows: Sequence[TaskRow], margin: float = MARGIN) -> str:
    """Per level: box plots with every correct task's speedup vs eager and vs torch.compile."""
    plt = _pyplot()
    levels = sorted({r.level for r in rows}, key=lambda lv: (lv is None, lv or 0))
    fig, ax = plt.subplots(figsize=(max(4.5, 2.2 * len(levels) + 1.5), 4))
    rng = random.Random(0)
    positions, data, colors = [], [], []
    for i, lv in enumerate(levels):
        recs = [r for r in rows if r.level == lv]
        for j, (attr, color) in enumerate((("speedup_vs_eager", "#2980b9"), ("speedup_vs_compile", "#8e44ad"))):
            vals = [getattr(r, attr) for r in recs if getattr(r, attr)]
            pos = i * 3 + j
            positions.append(pos)
            data.append(vals or [math.nan])
            colors.append(color)
            ax.scatter([pos + rng.uniform(-0.18, 0.18) for _ in vals], vals, s=12, color=color, alpha=0.7, zorder=3)
    box = ax.boxplot(data, positions=positions, widths=0.6, patch_artist=True, showfliers=False)
    for patch, color in zip(box["boxes"], colors):
        patch.set(facecolor=color, alpha=0.25)
    ax.set_yscale("log", base=2)
    ax.axhline(1.0, color="black", lw=0.8)
    ax.axhline(1 / (1 - margin), color="black", lw=0.6, ls="--")
    _times_axis(ax, "y")
    ax.set_xticks([i * 3 + 0.5 for i in range(len(levels))], [f"L{lv}" if lv is not None else "-" for lv in levels])
    ax.set_ylabel("speedup (log scale)")
    ax.set_title("Speedup of correct tasks: vs eager (blue), vs torch.compile (purple)")
    return _data_uri(fig)


def fast_p_curve(rows: Sequence[TaskRow]) -> str:
    """fast_p as p sweeps, over all tasks of the suite; markers at KernelBench's p values."""
    plt = _pyplot()
    total = len(rows)
    eager = [r.speedup_vs_eager for r in rows]
    comp = [r.speedup_vs_compile for r in rows]
    top = max([2.5] + [s * 1.1 for s in eager + comp if s])
    grid = [top * i / 300 for i in range(301)]
    fig, ax = plt.subplots(figsize=(6, 4))
    for vals, label, color in ((eager, "vs eager", "#2980b9"), (comp, "vs torch.compile", "#8e44ad")):
        ax.plot(grid, [fast_p(vals, total, p) for p in grid], label=label, color=color)
        ax.scatter(FAST_P, [fast_p(vals, total, p) for p in FAST_P], color=color, s=18, zorder=3)
    ax.set_xlabel("p (speedup threshold)")
    ax.set_ylabel("fast_p (share of all tasks)")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title(f"fast_p over {total} task(s)")
    return _data_uri(fig)


def per_task_bars(rows: Sequence[TaskRow]) -> str:
    """One row per task: speedup vs eager (bar) and vs compile (dot), coloured by reward; a
    task that failed or is missing is marked at 1x."""
    plt = _pyplot()
    names = [r.task for r in rows]
    fig, ax = plt.subplots(figsize=(8, max(2.5, 0.28 * len(names) + 1)))
    for i, r in enumerate(rows):
        if not r.correct:
            ax.scatter([1.0], [i], marker="x", color=_REWARD_COLORS[-1], zorder=3)
            continue
        if r.speedup_vs_eager:
            ax.barh(i, r.speedup_vs_eager - 1.0, left=1.0, height=0.6, color=_REWARD_COLORS.get(r.reward, "grey"))
        if r.speedup_vs_compile:
            ax.scatter([r.speedup_vs_compile], [i], marker="D", s=16, color="#8e44ad", zorder=3)
    ax.set_yticks(range(len(names)), names, fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log", base=2)
    ax.axvline(1.0, color="black", lw=0.8)
    _times_axis(ax, "x")
    from matplotlib.patches import Patch

    ax.legend(handles=[Patch(color=c, label=f"reward {r:+d}") for r, c in _REWARD_COLORS.items()],
              fontsize=7, loc="best")
    ax.set_xlabel("speedup (log scale): bar vs eager (colour = reward), diamond vs torch.compile, x = failed")
    return _data_uri(fig)
