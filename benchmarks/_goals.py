"""Issue 15's goals as one table: a row per goal, a column per CPU kind met, each cell read from that kind's
recorded result (``results/<name>.json`` on the reference kind, ``results/<name>.<kind>.json`` elsewhere).

``_harness.refresh_readme`` writes the table at the top of benchmarks/README.md's generated block, so it says
what the results files say and changes when a recorded run replaces one of them. What the figures mean, the
analyses behind them and how they moved over time are in benchmarks/NOTES.md.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Result = Mapping[str, Any]

__all__ = ["GOALS", "Goal", "goals_table", "kind_of"]


@dataclass(frozen=True)
class Cell:
    text: str
    met: bool | None  # None: issue 15 sets no goal for this CPU kind, or the figure is only shown


@dataclass(frozen=True)
class Goal:
    what: str  # the row's label, with the script that measures it
    target: str  # the goal as issue 15 sets it
    results: tuple[str, ...]  # benchmark names read, in this order; a kind's cell gets those it has
    read: Callable[[Sequence[Result], str], Cell]  # (one kind's results, the kind) -> its cell


def kind_of(result: Result) -> str | None:
    """The label a result is filed under (``amx``, ``avx2``, ``avx512_bf16-zen4``, ...), or None where it
    predates results recording their CPU."""
    m = result.get("machine") or {}
    return m.get("result_kind") or m.get("cpu_kind")


def _x(v: float | None, digits: int = 2) -> str:
    return "?" if v is None else f"{v:.{digits}f}x"


def _speed_target(kind: str) -> float | None:
    """TD3 against SB3: >= 4x where AMX exists, >= 1.6x on an AVX2-only CPU, no goal elsewhere."""
    base = kind.split("-")[0]
    return 4.0 if base == "amx" else 1.6 if base == "avx2" else None


def _met(value: float | None, need: float | None, at_least: bool = True) -> bool | None:
    if need is None or value is None:
        return None
    return value >= need if at_least else value <= need


def _td3_update(rs: Sequence[Result], kind: str) -> Cell:
    ratios, metrics = rs[0]["ratios"], rs[0]["metrics"]
    one, two = ratios["1t.auto.ms_per_update"], ratios["2t.auto.ms_per_update"]
    text = (f"{_x(one)} / {_x(two)} (paired {_x(ratios.get('1t.auto.paired'))} / "  # runs before pairing: ?
            f"{_x(ratios.get('2t.auto.paired'))}; {metrics.get('auto_precision', '?')})")
    return Cell(text, _met(min(one, two), _speed_target(kind)))


def _roofline(rs: Sequence[Result], kind: str) -> Cell:
    metrics = rs[0]["metrics"]
    one, two = metrics["1t.auto.roofline_fraction"], metrics["2t.auto.roofline_fraction"]
    text = f"{one:.2f} / {two:.2f} ({metrics.get('auto_precision', '?')})"
    return Cell(text, _met(min(one, two), 0.70))


def _learning(threads: int) -> Callable[[Sequence[Result], str], Cell]:
    """Every seed of the kind's runs at ``threads`` pooled: the ratio of the medians and the median of
    per-seed ratios."""
    def read(rs: Sequence[Result], kind: str) -> Cell:
        for r in rs:
            if r["metrics"].get("variant", "zoo-auto") != "zoo-auto":
                raise ValueError(f"{r['benchmark']} timed {r['metrics']['variant']}, not the default zoo-auto")
            ran = (r.get("settings") or {}).get("threads", threads)
            if ran != threads:
                raise ValueError(f"{r['benchmark']} ran on {ran} threads, not {threads}")
        ours = [s for r in rs for s in r["metrics"]["learn_steps_per_s_per_seed"]]
        sb3 = [s for r in rs for s in r["peers"]["sb3"]["learn_steps_per_s_per_seed"]]
        per_seed = [a / b for a, b in zip(ours, sb3)]
        pooled = statistics.median(ours) / statistics.median(sb3)
        middle = statistics.median(per_seed)
        text = (f"{_x(pooled)} over {len(ours)} seed{'s' if len(ours) > 1 else ''} "
                f"({statistics.median(ours):.1f} vs {statistics.median(sb3):.1f} learn steps/s)")
        if len(per_seed) > 1:
            text += f", per seed {min(per_seed):.2f}-{max(per_seed):.2f}x, median {_x(middle)}"
        return Cell(text, _met(min(pooled, middle), _speed_target(kind)))
    return read


def _returns(rs: Sequence[Result], kind: str) -> Cell:
    ours = [s for r in rs for s in r["metrics"]["final_return_per_seed"]]
    sb3 = [s for r in rs for s in r["peers"]["sb3"]["final_return_per_seed"]]
    diffs = [a - b for a, b in zip(ours, sb3)]
    return Cell(f"{statistics.median(diffs):+.1f} (per seed {min(diffs):+.1f} to {max(diffs):+.1f})", None)


def _hybridsn_map(rs: Sequence[Result], kind: str) -> Cell:
    metrics, window = rs[0]["metrics"], (rs[0].get("peers") or {}).get("per_window") or {}
    ours = metrics["full_map_s"]
    text = f"{ours:.2f} s ({metrics.get('auto_precision', '?')})"
    theirs = window.get("full_map_s") or window.get("full_map_fp32_s")
    if theirs:
        text += f" vs per-window {theirs:.1f} s"
    return Cell(text, _met(ours, 10.0, at_least=False))


def _attention(tokens: int) -> Callable[[Sequence[Result], str], Cell]:
    def read(rs: Sequence[Result], kind: str) -> Cell:
        ratios = rs[0]["ratios"]
        speed = ratios[f"long{tokens}_fp32_speedup_vs_reference"]
        memory = ratios[f"long{tokens}_fp32_memory_reference_over_ours"]
        return Cell(f"{_x(speed)} the time, {memory:.1f}x less memory", speed >= 1.5 or memory >= 3.0)
    return read


def _loader(rs: Sequence[Result], kind: str) -> Cell:
    ratios, metrics = rs[0]["ratios"], rs[0]["metrics"]
    best = ratios["clips_per_s_vs_best_peer"]
    paired = ratios.get("clips_per_s_vs_torchcodec_decoder_paired")
    text = f"{_x(best)} (paired {_x(paired)}; {metrics['clips_per_s']:.1f} clips/s)"
    return Cell(text, _met(best, 1.3))


_PRECISION_OPS = {"matmul": "matmul_256x400x300.1t_ms", "conv": "conv2d_8x64x56x56_k3.1t_ms",
                  "conv3d": "conv3d_hybridsn_16x8x24x23x23_k533.1t_ms"}


def _auto_precision(rs: Sequence[Result], kind: str) -> Cell:
    """What ``amp="auto"`` picked per op kind, beside bf16's speed relative to fp32 (the ratio is fp32's time
    over bf16's); met where it never picked bf16 for an op that bf16 ran slower."""
    auto, ratios = rs[0]["metrics"]["auto"], rs[0]["ratios"]
    parts, met = [], True
    for op, key in _PRECISION_OPS.items():
        pick, speed = auto.get(op, "?"), ratios.get(key)
        parts.append(f"{op} {pick} (bf16 {_x(speed)})")
        met &= not (pick == "bf16" and speed is not None and speed < 1.0)
    return Cell(" · ".join(parts), met)


_TD3_LEARN_1T = ("td3_vs_sb3_pendulum_v1_1thread", "td3_vs_sb3_pendulum_v1")
_TD3_LEARN_2T = ("td3_vs_sb3_pendulum_v1_2threads", "td3_vs_sb3_pendulum_v1_2threads_seeds12",
                 "td3_vs_sb3_pendulum_v1_2threads_seeds345", "td3_vs_sb3_pendulum_v1_2threads_seeds678")

GOALS: tuple[Goal, ...] = (
    Goal("TD3 update vs SB3, 1 / 2 threads, Pendulum rl-zoo preset (`td3_update.py`)",
         ">= 4x (amx), >= 1.6x (avx2) at both", ("td3_update",), _td3_update),
    Goal("TD3 update, fraction of the GEMM roofline measured in the run, 1 / 2 threads (`td3_update.py`)",
         ">= 0.70", ("td3_update",), _roofline),
    Goal("TD3 learning vs SB3 with both cores, Pendulum-v1, 20k steps (`td3_vs_sb3.py --threads 2`)",
         ">= 4x (amx), >= 1.6x (avx2)", _TD3_LEARN_2T, _learning(2)),
    Goal("TD3 learning vs SB3, 1 thread (`td3_vs_sb3.py`)", ">= 4x (amx), >= 1.6x (avx2)", _TD3_LEARN_1T,
         _learning(1)),
    Goal("TD3 final return minus SB3's, with both cores (median of seeds)", "equal returns",
         _TD3_LEARN_2T, _returns),
    Goal("HybridSN full 145x145 Indian Pines map, 2 threads (`hsi_predict_scene.py`)", "<= 10 s",
         ("hsi_predict_scene",), _hybridsn_map),
    Goal("Attention fwd+bwd, 512 tokens, fp32, vs the explicit-score reference (`attention_decode.py`)",
         ">= 1.5x the time or >= 3x less memory", ("attention_decode",), _attention(512)),
    Goal("Attention fwd+bwd, 2,048 tokens, fp32, same", ">= 1.5x the time or >= 3x less memory",
         ("attention_decode",), _attention(2048)),
    Goal("UCF101 clips/s vs the best peer, 2 workers (`ucf101_loader.py`)", ">= 1.3x", ("ucf101_loader",),
         _loader),
    Goal('`amp="auto"`\'s pick per op kind, bf16\'s speed over fp32\'s at 1 thread (`precision_ops.py`)',
         "never bf16 where it is slower", ("precision_ops",), _auto_precision),
)


def _kind_order(kinds: set[str], reference: str) -> list[str]:
    return sorted(kinds, key=lambda k: (k != reference, k.endswith("-emulated"), k))


def _heading(kind: str, results: Sequence[Result]) -> str:
    newest = max(results, key=lambda r: r.get("date", ""))
    m = newest.get("machine") or {}
    ident = (m.get("cpu_id") or "").replace("AuthenticAMD ", "").replace("GenuineIntel ", "")
    ident = ident.split(" stepping")[0]
    return f"{kind} ({m.get('cpu', '?')}{', ' + ident if ident else ''})"


def _cell(goal: Goal, found: Sequence[Result], kind: str) -> str:
    try:
        cell = goal.read(found, kind)
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as err:  # a result without this figure
        return f"unreadable ({type(err).__name__}: {err})"
    mark = {True: " **met**", False: " **not met**", None: ""}[cell.met]
    dates = sorted({r.get("date", "?")[:10] for r in found})
    return f"{cell.text}{mark} · {', '.join(dates)}"


def goals_table(results: Sequence[Result], reference: str = "amx") -> str:
    """The goals table as Markdown: a row per goal in :data:`GOALS`, a column per CPU kind that has a result
    any goal reads. A cell reads the kind's results of the goal's benchmarks; ``-`` where the kind has none."""
    names = {n for g in GOALS for n in g.results}
    by_kind: dict[str, dict[str, Result]] = {}
    for r in results:
        kind = kind_of(r)
        if kind is not None and r.get("benchmark") in names:
            by_kind.setdefault(kind, {})[r["benchmark"]] = r
    kinds = _kind_order(set(by_kind), reference)
    header = ["goal (issue 15)", "target", *(_heading(k, list(by_kind[k].values())) for k in kinds)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for goal in GOALS:
        row = [goal.what, goal.target]
        for kind in kinds:
            found = [by_kind[kind][n] for n in goal.results if n in by_kind[kind]]
            row.append(_cell(goal, found, kind) if found else "-")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"
