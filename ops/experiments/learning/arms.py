"""The arms of a comparison: a name → the registered estimator it trains with and the advantage knobs it sets.
Every registered estimator is an arm of its own name; a variant (`slca_decision`) is a row of `VARIANTS`, not a
branch at a call site. (The registry imports torch: `arms()` reads it when called, never at import.)"""

from __future__ import annotations

from dataclasses import dataclass, field

from slca.cli import CliError

REFERENCE = "slca"
"""The arm every other arm is compared with (SLCA-GRPO as the paper defines it)."""


@dataclass(frozen=True)
class Arm:
    name: str
    estimator: str
    """A registered advantage estimator (`learner.advantages`)."""
    advantage: dict[str, object] = field(default_factory=dict)
    """`learner.advantage.*` overrides (`AdvantageSettings` fields) for this arm's `slca train`."""

    def set_args(self) -> list[str]:
        """`--set learner.advantage.<k>=<v>` for each override (JSON-ish literals the config loader parses)."""
        return [a for k, v in sorted(self.advantage.items()) for a in ("--set", f"learner.advantage.{k}={_lit(v)}")]


def _lit(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


VARIANTS: dict[str, Arm] = {arm.name: arm for arm in (Arm("slca_decision", "slca", {"decision_token": True}),)}
"""The arms that are a registered estimator with advantage knobs set."""


def arms() -> dict[str, Arm]:
    """Every arm: each registered estimator (built-in or a plug-in's) with no overrides, the reference first and
    the others in registration order, then `VARIANTS`. The default arms of `slca bench learning`."""
    from learner.advantages import ESTIMATORS

    names = sorted(ESTIMATORS, key=lambda name: name != REFERENCE)  # stable: registration order after the reference
    return {**{name: Arm(name, name) for name in names}, **VARIANTS}


def default_arms() -> tuple[str, ...]:
    return tuple(arms())


def resolve_arm(name: str) -> Arm:
    """The arm called `name` (a registered estimator or a variant); anything else is a CLI error naming them."""
    known = arms()
    if name in known:
        return known[name]
    raise CliError(f"unknown arm {name!r}; known: {', '.join(known)}")
