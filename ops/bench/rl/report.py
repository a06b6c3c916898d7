"""`slca bench rl`'s task and figures: the `SideSpec` both trainers are given alike, one `SideResult` per trainer,
the per-hour arithmetic, the ratio and the table."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

GIB = 1024**3
TARGET_RATIO = 2.0
"""slca ÷ TRL trained tokens per hour on the same generation engine: the median over alternated pairs (issue 22)."""
TARGET_PEAK_RSS_GIB = 6.0
"""Whole pipeline's peak resident memory (issue 13)."""


@dataclass
class SideSpec:
    """What both sides are given alike (each side's spec extends it: `ops.bench.rl.trl_side.TrlSpec`,
    `ops.bench.rl.slca_side.SlcaSpec`): the model, the pack whose train-split prompts they train on, the group size, the
    token budget per completion and the wall time of the measured window."""

    model: str
    pack: str
    group_size: int
    max_new_tokens: int
    seconds: float


MEMORY_SAMPLE_S = 0.1
PSS_EVERY_S = 1.0
"""One process's proportional set size read a second (`TreeSampler.pss_every_s`): ≈ 1% of a core."""
"""Both sides' resident sets are read every 0.1 s (issue 40: ≥ 10 a second; at 1 s a peak between readings — a
step's activations, a weight load — went unseen)."""


@dataclass
class SideResult:
    name: str
    """'trl' or 'slca'."""
    seconds: float
    """Measured wall time (from ready to the end of the window; start-up is `startup_s`)."""
    completions: int
    """Completions generated in the window (slca: trajectories recorded by serve)."""
    completions_trained: int
    """Completions that went into an optimizer update (a step with a non-zero advantage) in the window."""
    updates: int
    """Optimizer steps in the window whose groups did not all have zero advantage (the weights changed)."""
    generated_tokens: int
    """Tokens sampled in the window."""
    peak_rss_bytes: int
    """Peak of the summed resident sets of the side's processes."""
    startup_s: float = 0.0
    """Start → end of the cold first optimizer step (excluded from the window on both sides)."""
    trained_tokens: int = 0
    """Completion tokens of the updates in the window (not tokens served)."""
    steps: int = 0
    """Optimizer steps in the window, zero-advantage ones included."""
    prompt_tokens: int = 0
    """Prompt tokens of the completions generated in the window, each completion counting its prompt (TRL; 0 where
    the side does not see them: slca's serve keeps no such count)."""
    prompt_tokens_trained: int = 0
    """Prompt tokens the trainer's forward passes ran in the window's updates (TRL: every completion's row carries
    its prompt; slca: the packed rows, one prompt per group with `learner.share_prefix`, one per member without)."""
    model_tokens_trained: int = 0
    """Every token the trainer's forward passes ran in the window's updates, prompt and completion (the work behind
    `trained_tokens`)."""
    cpu_s_by_process: dict[str, float] = field(default_factory=dict)
    """CPU seconds (user + system) spent in the window, per process role."""
    peak_rss_by_process: dict[str, int] = field(default_factory=dict)
    """Each role's resident set at the moment of the summed peak."""
    peak_pss_bytes: int = 0
    """Peak of the summed proportional set sizes (pages shared between the side's processes counted once;
    `TreeSampler.peak_pss_bytes`); 0: a window measured before it was recorded."""
    peak_pss_by_process: dict[str, int] = field(default_factory=dict)
    memory_samples_per_s: float = 0.0
    """How often the resident sets were read for the peak (`MEMORY_SAMPLE_S`; 0: a window measured before it was
    recorded)."""
    notes: list[str] = field(default_factory=list)
    extra: dict = field(default_factory=dict)

    def per_hour(self, count: float) -> float:
        if self.seconds <= 0:
            raise ValueError(f"{self.name}: measured window of {self.seconds} s")
        return count * 3600.0 / self.seconds

    @property
    def completions_per_hour(self) -> float:
        return self.per_hour(self.completions)

    @property
    def trained_per_hour(self) -> float:
        return self.per_hour(self.completions_trained)

    @property
    def updates_per_hour(self) -> float:
        return self.per_hour(self.updates)

    @property
    def tokens_per_s(self) -> float:
        return self.generated_tokens / self.seconds if self.seconds > 0 else 0.0

    @property
    def trained_tokens_per_s(self) -> float:
        return self.trained_tokens / self.seconds if self.seconds > 0 else 0.0

    @property
    def model_tokens_trained_per_s(self) -> float:
        return self.model_tokens_trained / self.seconds if self.seconds > 0 else 0.0

    @property
    def cpu_s(self) -> float:
        return sum(self.cpu_s_by_process.values())

    @classmethod
    def from_dict(cls, data: dict) -> "SideResult":
        """The inverse of `to_dict` (its derived rates dropped): a window read back when a bench resumes."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    def to_dict(self) -> dict:
        return {
            **asdict(self),
            "completions_per_hour": self.completions_per_hour,
            "completions_trained_per_hour": self.trained_per_hour,
            "updates_per_hour": self.updates_per_hour,
            "tokens_per_s": self.tokens_per_s,
            "trained_tokens_per_s": self.trained_tokens_per_s,
            "model_tokens_trained_per_s": self.model_tokens_trained_per_s,
            "peak_rss_gib": self.peak_rss_bytes / GIB,
            "peak_pss_gib": self.peak_pss_bytes / GIB,
            "cpu_s": self.cpu_s,
        }


def ratios(slca: SideResult, trl: SideResult) -> dict[str, float | None]:
    """slca ÷ TRL for each rate (None where TRL's is zero); memory as TRL ÷ slca (higher is better for slca)."""

    def div(a: float, b: float) -> float | None:
        return a / b if b else None

    return {
        "completions_per_hour": div(slca.completions_per_hour, trl.completions_per_hour),
        "completions_trained_per_hour": div(slca.trained_per_hour, trl.trained_per_hour),
        "updates_per_hour": div(slca.updates_per_hour, trl.updates_per_hour),
        "tokens_per_s": div(slca.tokens_per_s, trl.tokens_per_s),
        "trained_tokens_per_s": div(slca.trained_tokens_per_s, trl.trained_tokens_per_s),
        "peak_rss_trl_over_slca": div(trl.peak_rss_bytes, slca.peak_rss_bytes),
    }


def _fmt(v: float | None, spec: str) -> str:
    return "—" if v is None else format(v, spec)


def table(sides: list[SideResult]) -> list[str]:
    by = {s.name: s for s in sides}
    rows = [
        ("completions/hour", lambda s: s.completions_per_hour, ",.0f"),
        ("completions trained/hour", lambda s: s.trained_per_hour, ",.0f"),
        ("optimizer updates/hour", lambda s: s.updates_per_hour, ",.1f"),
        ("generated tokens/s", lambda s: s.tokens_per_s, ",.1f"),
        ("trained tokens/s", lambda s: s.trained_tokens_per_s, ",.1f"),
        ("prompt tokens trained (window)", lambda s: s.prompt_tokens_trained, ",.0f"),
        ("all tokens trained/s (forward)", lambda s: s.model_tokens_trained_per_s, ",.1f"),
        ("peak RSS, GiB (all processes)", lambda s: s.peak_rss_bytes / GIB, ".2f"),
        ("peak PSS, GiB (shared pages once)", lambda s: s.peak_pss_bytes / GIB or None, ".2f"),
        ("memory readings per second", lambda s: s.memory_samples_per_s, ".1f"),
        ("CPU seconds in the window", lambda s: s.cpu_s, ",.0f"),
        ("measured wall time, s", lambda s: s.seconds, ",.0f"),
        ("start-up + cold first step, s", lambda s: s.startup_s, ",.0f"),
    ]
    names = [n for n in ("trl", "slca") if n in by]
    r = ratios(by["slca"], by["trl"]) if len(names) == 2 else {}
    ratio_of = {
        "completions/hour": r.get("completions_per_hour"),
        "completions trained/hour": r.get("completions_trained_per_hour"),
        "optimizer updates/hour": r.get("updates_per_hour"),
        "generated tokens/s": r.get("tokens_per_s"),
        "trained tokens/s": r.get("trained_tokens_per_s"),
    }
    head = f"  {'figure':<32}" + "".join(f"{n:>14}" for n in names) + ("   slca ÷ TRL" if len(names) == 2 else "")
    out = [head]
    for label, get, spec in rows:
        line = f"  {label:<32}" + "".join(f"{_fmt(get(by[n]), spec):>14}" for n in names)
        if len(names) == 2 and label in ratio_of:
            line += f"   {_fmt(ratio_of[label], '.2f')}×"
        out.append(line)
    return out


def verdict(
    median_ratio: float | None,
    interval: list[float] | None,
    coverage: float | None,
    peak_gib: float,
    peak_pss_gib: float = 0.0,
) -> list[str]:
    """The targets over the alternated pairs: the median slca ÷ TRL trained tokens per hour (with its interval)
    and the pipeline's largest peak RSS of any window (judged: it counts shared pages in every process that maps
    them, so it is the higher figure); its peak PSS beside it where recorded."""
    spread = f" ({coverage:.0%} interval {interval[0]:.2f}–{interval[1]:.2f})" if interval and coverage else ""
    met = median_ratio is not None and median_ratio >= TARGET_RATIO
    return [
        f"  slca ÷ TRL trained tokens/hour, median over pairs = {_fmt(median_ratio, '.2f')}{spread} (target ≥ "
        f"{TARGET_RATIO:.1f}: {'met' if met else 'NOT met'}); pipeline peak RSS {peak_gib:.2f} GiB "
        f"(target ≤ {TARGET_PEAK_RSS_GIB:.0f}: {'met' if peak_gib <= TARGET_PEAK_RSS_GIB else 'NOT met'})"
        + (f"; peak PSS (shared pages once) {peak_pss_gib:.2f} GiB" if peak_pss_gib else "")
    ]


def slca_peaks_gib(results: dict, windows: int) -> tuple[float, float]:
    """slca's largest peak RSS and largest peak PSS over the windows (`results[i, "slca"]`), in GiB."""
    sides = [results[i, "slca"] for i in range(windows)]
    return max(s.peak_rss_bytes for s in sides) / GIB, max(s.peak_pss_bytes for s in sides) / GIB


def ratio_spread(per_pair: list[dict[str, float | None]]) -> dict[str, dict[str, float] | None]:
    """Each rate's slca ÷ TRL over the pairs: median, min and max (None where no pair has the ratio)."""
    import statistics

    out: dict[str, dict[str, float] | None] = {}
    for key in per_pair[0] if per_pair else ():
        values = [r[key] for r in per_pair if r.get(key) is not None]
        out[key] = {"median": statistics.median(values), "min": min(values), "max": max(values)} if values else None
    return out


def where_time_goes(side: SideResult) -> list[str]:
    """Per-process CPU seconds and their share, and each process's memory at the peak."""
    total = side.cpu_s or 1.0
    out = [f"  where the time goes ({side.name}): CPU seconds per process in {side.seconds:,.0f} s of wall time"]
    for role, cpu in side.cpu_s_by_process.items():
        rss = side.peak_rss_by_process.get(role)
        mem = f", {rss / GIB:.2f} GiB at the peak" if rss is not None else ""
        out.append(f"    {role:<22}{cpu:>9,.0f} s  {100 * cpu / total:5.1f}%  ({cpu / side.seconds:.2f} cores){mem}")
    return out
