"""The arms of a comparison: a name → the registered estimator it trains with and the advantage knobs it sets.
One table, so that a variant (`slca_decision`) is a row, not a branch at a call site."""

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


ARMS: dict[str, Arm] = {
    arm.name: arm
    for arm in (
        Arm("slca", "slca"),
        Arm("grpo", "grpo"),
        Arm("toolpo", "toolpo"),
        Arm("rltr", "rltr"),
        Arm("slca_decision", "slca", {"decision_token": True}),
    )
}
DEFAULT_ARMS = tuple(ARMS)


def resolve_arm(name: str) -> Arm:
    """The arm called `name`: a row of `ARMS`, else a registered estimator with no overrides (a plug-in's);
    anything else is a CLI error naming both."""
    from learner.advantages import ESTIMATORS

    if name in ARMS:
        return ARMS[name]
    if name in ESTIMATORS:
        return Arm(name, name)
    raise CliError(
        f"unknown arm {name!r}; known: {', '.join(ARMS)} (and any registered estimator: "
        f"{', '.join(sorted(ESTIMATORS))})"
    )
