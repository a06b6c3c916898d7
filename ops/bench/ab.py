"""The one method of every side-by-side bench (`slca bench sft | serve | rl`, issue 22): two sides A (the
baseline) and B, measured in alternated windows on the same machine, reported as per-pair ratios B ÷ A.

- **Sides.** A `Side` is a name, `measure()` — one measured window, returning a `Measurement` (its figure, e.g.
  tokens/s, higher is better) or a bare number — and an optional `warmup()`. `waves(...)` turns a callable that
  runs one wave (one step, one round of requests) into a `measure` obeying a `WindowRule`: at least
  `min_waves` waves and at least `min_seconds` seconds per window.
- **Warm-up.** Before the first pair each side runs `warmup()` (or, without one, a discarded `measure()`)
  `warmup` times, both sides the same number of times, in the order of the first pair; nothing of it counts.
- **Order.** `pairs` (≥ 3) pairs of windows; the side that goes first alternates pair by pair (A B, B A, A B …:
  `order="alternate"`) or is drawn per pair from `random.Random(seed)` (`order="random"`, the seed is
  recorded): neither side always gets the cooler or the warmer machine.
- **Report.** Per pair the ratio B ÷ A; the median ratio, its min–max and a distribution-free interval for the
  median from order statistics (`median_interval`: the widest-coverage-first pair of order statistics with
  coverage ≥ 95% under the binomial law; with fewer than 6 pairs no such pair exists, so min–max is given with
  its exact coverage, e.g. 75% for 3 pairs); per-side medians of the figure; the load average and the CPU flags
  at start and at end (`ops.common.machine`).
- **Writing.** `write(out, result, markdown)` writes JSON + Markdown and refuses any absolute machine path in
  either (`machine_paths`); a result records the command a user would type (`ops.bench.common.bench_command`).
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

MIN_PAIRS = 3
CONFIDENCE = 0.95
ORDERS = ("alternate", "random")


@dataclass(frozen=True)
class WindowRule:
    """A measured window lasts at least `min_waves` waves and at least `min_seconds` seconds (0: no bound)."""

    min_waves: int = 1
    min_seconds: float = 0.0

    def done(self, waves: int, seconds: float) -> bool:
        return waves >= max(1, self.min_waves) and seconds >= self.min_seconds


@dataclass
class Measurement:
    """One measured window of one side: its figure (higher is better) and what it was made of."""

    figure: float
    units: float | None = None
    """What the figure counts (tokens, completions …), when the figure is units ÷ seconds."""
    seconds: float | None = None
    waves: int | None = None
    detail: dict = field(default_factory=dict)
    """Side-specific figures of the window (padding share, failures …), reported as they are."""


@dataclass
class Wave:
    """One wave of a window: units done in seconds, and side-specific counts summed over the window."""

    units: float
    seconds: float
    counts: dict = field(default_factory=dict)


def waves(run_wave: Callable[[], Wave], rule: WindowRule) -> Callable[[], Measurement]:
    """A `measure` that runs waves until `rule` is met; figure = units ÷ seconds (the waves' own seconds)."""

    def measure() -> Measurement:
        n, units, seconds, counts = 0, 0.0, 0.0, {}
        while not rule.done(n, seconds):
            w = run_wave()
            n, units, seconds = n + 1, units + w.units, seconds + w.seconds
            for k, v in w.counts.items():
                counts[k] = counts.get(k, 0) + v
        return Measurement(units / seconds if seconds > 0 else 0.0, units, seconds, n, counts)

    return measure


@dataclass
class Side:
    name: str
    measure: Callable[[], Measurement | float]
    warmup: Callable[[], object] | None = None


@dataclass
class Window:
    pair: int
    position: int
    """0: this side went first in its pair, 1: second."""
    side: str
    figure: float
    units: float | None
    seconds: float | None
    waves: int | None
    detail: dict


def pair_orders(pairs: int, order: str = "alternate", seed: int = 0) -> list[tuple[str, str]]:
    """Which side goes first in each pair: ('A', 'B') or ('B', 'A')."""
    if order not in ORDERS:
        raise ValueError(f"order {order!r}: one of {', '.join(ORDERS)}")
    if order == "alternate":
        return [("A", "B") if i % 2 == 0 else ("B", "A") for i in range(pairs)]
    rng = random.Random(seed)
    return [("A", "B") if rng.random() < 0.5 else ("B", "A") for _ in range(pairs)]


def median_interval(values: list[float], confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """(low, high, coverage): the order statistics x(k) ≤ median ≤ x(n+1−k) with the largest k whose exact
    coverage 1 − 2·P(Binomial(n, ½) < k) is ≥ `confidence`; with no such k (n < 6 at 95%), min–max and its
    coverage 1 − 2·½ⁿ."""
    xs = sorted(values)
    n = len(xs)
    if n == 0:
        raise ValueError("no values")

    def coverage(k: int) -> float:
        return 1 - 2 * sum(math.comb(n, i) for i in range(k)) / 2**n

    k = 1
    while k + 1 <= (n + 1) // 2 and coverage(k + 1) >= confidence:
        k += 1
    return xs[k - 1], xs[n - k], coverage(k)


def machine_now(load: Callable[[], tuple[float, float, float]] = os.getloadavg) -> dict:
    """Load average (1, 5, 15 min) and the relevant CPU flags, now."""
    from ops.common.machine import RELEVANT_FLAGS
    from slca.models.precision import cpu_flags

    flags = cpu_flags()
    return {"load_average": [round(x, 2) for x in load()], "cpu_flags": [f for f in RELEVANT_FLAGS if f in flags]}


@dataclass
class ABResult:
    a: str
    b: str
    pairs: int
    order: str
    seed: int | None
    orders: list[list[str]]
    warmup: int
    windows: list[Window]
    machine_start: dict
    machine_end: dict

    def figures(self, side: str) -> list[float]:
        return [w.figure for w in sorted(self.windows, key=lambda w: w.pair) if w.side == side]

    def ratios(self) -> list[float | None]:
        """B ÷ A per pair (None where A's figure is 0)."""
        return [b / a if a else None for a, b in zip(self.figures(self.a), self.figures(self.b))]

    def summary(self) -> dict:
        ratios = [r for r in self.ratios() if r is not None]
        out: dict = {
            "ratio_b_over_a": self.ratios(),
            "median_a": statistics.median(self.figures(self.a)),
            "median_b": statistics.median(self.figures(self.b)),
        }
        if ratios:
            low, high, cov = median_interval(ratios)
            out.update(
                median_ratio=statistics.median(ratios),
                min_ratio=min(ratios),
                max_ratio=max(ratios),
                interval=[low, high],
                interval_coverage=round(cov, 4),
            )
        else:
            out.update(median_ratio=None, min_ratio=None, max_ratio=None, interval=None, interval_coverage=None)
        return out

    @classmethod
    def from_dict(cls, data: dict) -> "ABResult":
        """The inverse of `to_dict` (its summary, derived from the windows, dropped): a result read back when a
        long bench resumes."""
        return cls(
            data["a"],
            data["b"],
            data["pairs"],
            data["order"],
            data["seed"],
            data["orders"],
            data["warmup_per_side"],
            [Window(**w) for w in data["windows"]],
            data["machine_start"],
            data["machine_end"],
        )

    def to_dict(self) -> dict:
        return {
            "a": self.a,
            "b": self.b,
            "pairs": self.pairs,
            "order": self.order,
            "seed": self.seed,
            "orders": self.orders,
            "warmup_per_side": self.warmup,
            **self.summary(),
            "windows": [asdict(w) for w in self.windows],
            "machine_start": self.machine_start,
            "machine_end": self.machine_end,
        }


def _measurement(value: Measurement | float) -> Measurement:
    return value if isinstance(value, Measurement) else Measurement(float(value))


def alternate(
    a: Side,
    b: Side,
    pairs: int = MIN_PAIRS,
    order: str = "alternate",
    seed: int = 0,
    warmup: int = 1,
    machine: Callable[[], dict] = machine_now,
    on_window: Callable[[Window], None] | None = None,
    done: list[Window] | None = None,
) -> ABResult:
    """Warm both sides up alike, then `pairs` pairs of windows in alternated order; see the module docstring.
    `done`: windows measured by an earlier, interrupted run of the same bench (`on_window` persisted them): they are
    kept as they are and only the missing ones run (a long bench resumes where it stopped); the warm-up runs
    again only when no window is done."""
    if pairs < MIN_PAIRS:
        raise ValueError(f"pairs={pairs}: at least {MIN_PAIRS} pairs")
    if warmup < 0:
        raise ValueError("warmup ≥ 0")
    orders = pair_orders(pairs, order, seed)
    sides = {"A": a, "B": b}
    earlier = {(w.pair, w.position): w for w in done or []}
    for (i, position), w in earlier.items():
        if i >= pairs or w.side != sides[orders[i][position]].name:
            raise ValueError(f"done window {i}/{position} ({w.side}) is not one of this run's windows")
    start = machine()
    for label in orders[0] if not earlier else ():
        side = sides[label]
        for _ in range(warmup):
            side.warmup() if side.warmup is not None else side.measure()
    windows: list[Window] = []
    for i, first_second in enumerate(orders):
        for position, label in enumerate(first_second):
            if (i, position) in earlier:
                windows.append(earlier[i, position])
                continue
            side = sides[label]
            m = _measurement(side.measure())
            windows.append(Window(i, position, side.name, m.figure, m.units, m.seconds, m.waves, m.detail))
            if on_window is not None:
                on_window(windows[-1])
    return ABResult(
        a.name,
        b.name,
        pairs,
        order,
        seed if order == "random" else None,
        [list(o) for o in orders],
        warmup,
        windows,
        start,
        machine(),
    )


class ResumeError(ValueError):
    """A resume file holds records of a run with other settings."""


class ResumeLog:
    """What a long bench has measured so far, one JSON record per line after a header line with the run's settings
    (`spec`, which should hold `machine_identity()`), appended as each record is done: the same command after an
    interruption (a stopped session, a crash) reads the records back and measures only what is missing. Records
    of other settings, or of another machine, are refused rather than mixed into a result."""

    def __init__(self, path: Path | str, spec: dict):
        self.path = Path(path)
        self.spec = json.loads(json.dumps(spec))  # as it will read back (tuples become lists)

    def load(self) -> list[dict]:
        if not self.path.is_file():
            return []
        rows = [json.loads(line) for line in self.path.read_text().splitlines() if line.strip()]
        if not rows or rows[0].get("spec") != self.spec:
            raise ResumeError(
                f"{self.path} holds a run with other settings or from another machine: give another --out, or remove "
                "it to start over"
            )
        return rows[1:]

    def add(self, record: dict) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fresh = not self.path.is_file()
        with self.path.open("a") as f:
            if fresh:
                f.write(json.dumps({"spec": self.spec}) + "\n")
            f.write(json.dumps(record) + "\n")


def machine_identity() -> dict:
    """What a resumed run must share with the run it continues, beside its settings: the CPU (model, cores, the
    flags that change the kernels). Windows measured on another machine are not part of the same comparison."""
    from ops.common.machine import machine_facts

    facts = machine_facts()
    return {k: facts[k] for k in ("cpu", "cores", "cpu_flags")}


def resume_path(out: Path | str, name: str) -> Path:
    """Where a bench writing to `out` (a directory, or a .json file) keeps its resume file `name`."""
    out = Path(out)
    return (out.parent if out.suffix == ".json" else out) / name


def _num(v: float | None, spec: str = ".3g") -> str:
    return "—" if v is None else format(v, spec)


def markdown(result: ABResult, figure: str = "figure") -> list[str]:
    """The pairs table and the summary line, in Markdown."""
    s = result.summary()
    by = {(w.pair, w.side): w for w in result.windows}
    lines = [
        f"| pair | first | {result.a} {figure} | {result.b} {figure} | {result.b} ÷ {result.a} |",
        "|---|---|---|---|---|",
    ]
    for i, r in enumerate(s["ratio_b_over_a"]):
        first = result.a if result.orders[i][0] == "A" else result.b
        lines.append(
            f"| {i + 1} | {first} | {_num(by[i, result.a].figure)} | {_num(by[i, result.b].figure)} | "
            f"{_num(r, '.3f')} |"
        )
    if s["median_ratio"] is not None:
        lo, hi = s["interval"]
        lines += [
            "",
            f"{result.b} ÷ {result.a}: median **{s['median_ratio']:.3f}×** over {result.pairs} pairs "
            f"(min–max {s['min_ratio']:.3f}–{s['max_ratio']:.3f}; {s['interval_coverage']:.1%} interval for "
            f"the median {lo:.3f}–{hi:.3f}); medians {result.a} {_num(s['median_a'])}, {result.b} "
            f"{_num(s['median_b'])} {figure}",
        ]
    ms, me = result.machine_start, result.machine_end
    lines += [
        "",
        f"load average {ms.get('load_average')} → {me.get('load_average')}; CPU flags "
        f"{', '.join(ms.get('cpu_flags') or []) or 'none of note'}",
    ]
    return lines


# --- no machine paths in results ------------------------------------------------------------------------------

ALLOWED_ROOTS = (
    "/v1/",
    "/admin/",
    "/metrics",
    "/healthz",
    "/readyz",
    "/health",
    "/dashboard/",
    "/openapi.json",
    "/proc",
)
"""Strings that start like absolute paths but name no file of the machine: HTTP routes, Linux's /proc."""
_TOKEN = re.compile(r"""[\s=:,;'"(\[{<]+""")
_WINDOWS = re.compile(r"(?<![\w])[A-Za-z]:\\")


class MachinePathError(ValueError):
    """A result would carry an absolute path of the machine it ran on."""


def _path_like(token: str) -> bool:
    token = token.rstrip(")]}>.,;'\"")
    if token.startswith("~/") or token == "~":
        return True
    if len(token) < 2 or token[0] != "/" or token[1] == "/" or token.startswith(ALLOWED_ROOTS):
        return False
    # "/s" or "/step" after a figure is a unit ("1,200 XADD /s"), not a path: a path has a second component or
    # starts at a root directory every Unix machine has
    return "/" in token[1:] or token[1:] in _ROOT_DIRS


_ROOT_DIRS = {"tmp", "home", "root", "work", "usr", "opt", "var", "etc", "mnt", "srv", "data", "proc", "dev", "run"}


def machine_paths(obj, where: str = "$") -> list[str]:
    """Every place in `obj` (JSON-like: dicts, lists, strings, keys included) holding an absolute path, the
    home directory or the working directory."""
    found: list[str] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            found += machine_paths(k, f"{where}.<key>") + machine_paths(v, f"{where}.{k}")
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            found += machine_paths(v, f"{where}[{i}]")
    elif isinstance(obj, (str, Path)):
        text = str(obj)
        # a URL's path is not the machine's (http://127.0.0.1:8000/v1/...): only whole tokens count
        tokens = [t for t in _TOKEN.split(re.sub(r"\w+://\S*", " ", text)) if t]
        home = os.path.expanduser("~")
        cwd = os.getcwd()
        if (
            any(_path_like(t) for t in tokens)
            or _WINDOWS.search(text)
            or (len(home) > 1 and home in text)
            or (len(cwd) > 1 and cwd in text)
        ):
            found.append(f"{where}: {text[:120]!r}")
    return found


def check_no_paths(*objs) -> None:
    found = [p for o in objs for p in machine_paths(o)]
    if found:
        raise MachinePathError("a result may not carry machine paths (use names): " + "; ".join(found[:5]))


def write(out: Path | str, result: dict, markdown_lines: list[str], title: str) -> tuple[Path, Path]:
    """`results.json` and `table.md` in the directory `out` (or `out` itself when it ends in .json, the
    Markdown beside it); refuses (MachinePathError, nothing written) a result holding a machine path."""
    text = (
        "\n".join(
            [f"# {title}", "", *(f"- {k}: {v}" for k, v in result.items() if k == "command"), "", *markdown_lines]
        )
        + "\n"
    )
    check_no_paths(result, text)
    out = Path(out)
    json_path, md_path = (
        (out, out.with_suffix(".md")) if out.suffix == ".json" else (out / "results.json", out / "table.md")
    )
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(result, indent=2) + "\n")
    md_path.write_text(text)
    return json_path, md_path


def per_side(result: ABResult, key: str) -> dict[str, list]:
    """Each side's `detail[key]`, window by window (a figure a bench reports beside its ratio: RSS …)."""
    return {side: [w.detail[key] for w in result.windows if w.side == side] for side in (result.a, result.b)}


def report(out, header: dict, result: ABResult, figure: str, beside: tuple[str, dict], title: str) -> None:
    """Print the A/B table with `beside` (a heading and `per_side` values) under it, and write it with the
    header's facts into `out` (None: print only)."""
    heading, values = beside
    lines = [*markdown(result, figure), "", heading, "", *(f"- {side}: {v}" for side, v in values.items())]
    if out:
        write(out, {**header, **result.to_dict()}, lines, title)
        print(f"wrote {out}")
    print("\n".join(lines))


def elapsed(fn: Callable[[], object], clock: Callable[[], float] = time.perf_counter) -> tuple[object, float]:
    """fn()'s value and the seconds it took."""
    t0 = clock()
    value = fn()
    return value, clock() - t0
