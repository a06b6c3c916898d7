"""The `slca sft` learning rate, from how much of the real budget is spent.

Why: the old loop guessed a step horizon from the first step's time; the first step is slow (allocation,
kernel set-up), so the guess was short and half the steps of a timed run sat at the lr floor. Here progress
is the spent fraction of the budget — steps done ÷ --steps, or seconds elapsed ÷ --minutes, whichever is
further along when both are set — so the decay reaches its floor exactly when the run stops.

lr(step, p) = base × warm × (1 − (1 − floor) p), where warm = min(1, max((step+1)/warmup_steps,
p/warmup_fraction)) ramps up over the first `warmup_steps` steps or the first `warmup_fraction` of the
budget, whichever ends first (a short timed run does not spend itself warming up). Linear warm-up then
linear decay, as measured (docs/cpu-facts.md#warm-start: lr 5e-5, 10 warm-up steps)."""

from __future__ import annotations

from dataclasses import dataclass

WARMUP_STEPS = 10
WARMUP_FRACTION = 0.05
FLOOR = 0.05
"""The lr at the end of the budget, as a share of the base lr."""


@dataclass(frozen=True)
class Budget:
    steps: int = 0
    """Stop after this many steps (0: no step limit)."""
    seconds: float = 0.0
    """Stop once this many seconds of training have passed (0: no time limit)."""
    min_steps: int = 0
    """The time limit ends training only after this many steps (0: no floor; `steps` still caps). Why: minutes buy
    very different training on a loaded machine — a 6-minute warm start under a soak's load made 5 steps, and a model
    RL could not learn from (docs/cpu-facts.md#warm-start)."""

    def progress(self, step: int, elapsed: float) -> float:
        """Spent fraction in [0, 1] (0 with no limit at all). With a floor, the time's share counts only as far as
        the steps reached the floor: the later of the two ends the budget, and the lr decays to that end."""
        fractions = [step / self.steps] if self.steps else []
        if self.seconds:
            timed = elapsed / self.seconds
            fractions.append(min(timed, step / self.min_steps) if self.min_steps else timed)
        return min(1.0, max(fractions, default=0.0))

    def done(self, step: int, elapsed: float) -> bool:
        return bool(self.steps or self.seconds) and self.progress(step, elapsed) >= 1.0

    def seconds_left(self, step: int, elapsed: float) -> float | None:
        """Time left: by the clock when timed, else extrapolated from the mean step time (None before step 1)."""
        if self.min_steps and self.seconds and step < self.min_steps and elapsed >= self.seconds:
            return elapsed / step * (self.min_steps - step) if step else None
        if self.seconds and (not self.steps or elapsed / self.seconds >= step / self.steps):
            return max(0.0, self.seconds - elapsed)
        if self.steps and step:
            return elapsed / step * (self.steps - step)
        return None


def lr_at(
    step: int,
    progress: float,
    base: float,
    warmup_steps: int = WARMUP_STEPS,
    warmup_fraction: float = WARMUP_FRACTION,
    floor: float = FLOOR,
) -> float:
    """The lr of step `step` (0-based) started at budget fraction `progress` (see the module docstring)."""
    progress = min(1.0, max(0.0, progress))
    warm = min(1.0, max((step + 1) / max(1, warmup_steps), progress / warmup_fraction if warmup_fraction else 1.0))
    return base * warm * (1 - (1 - floor) * progress)
