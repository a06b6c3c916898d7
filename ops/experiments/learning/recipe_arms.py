"""The arms of the recipe sweep (`slca bench recipe`): a name → the estimator and the settings it trains with.

One table, no branches: an arm is `slca train` with these `--set` overrides. Every arm trains for the same
minutes on the same fixed training tasks from the same warm start; what differs is only what the row says.

- `today`: what `make run` trained with before the sweep (one task's group of 8 per step, AdamW at 1e-5, the
  exec channel as the paper defines it, no screening, the decision token off).
- the `g*` rows: several groups per step, an exec channel that pays `success` too, the decision not to call
  credited on no-tool tasks, groups without success variance screened out — at three learning rates and two
  batch sizes (one factor at a time around `g4-lr3e-6`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from slca.cli import CliError

AIMED = {
    "learner.advantage.success_weight": 1.0,
    "learner.advantage.decision_token": True,
    "learner.screen_success_variance": True,
}
"""The advantage aimed at success (the `g*` arms share it)."""


@dataclass(frozen=True)
class RecipeArm:
    name: str
    settings: dict[str, object] = field(default_factory=dict)
    estimator: str = "slca"

    def set_args(self) -> list[str]:
        return [a for k, v in sorted(self.settings.items()) for a in ("--set", f"{k}={_literal(v)}")]


def _literal(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _aimed(groups: int, lr: float) -> dict[str, object]:
    return {"learner.groups_per_step": groups, "learner.lr": lr, **AIMED}


RECIPE_ARMS: dict[str, RecipeArm] = {
    arm.name: arm
    for arm in (
        RecipeArm(
            "today",
            {
                "learner.groups_per_step": 1,
                "learner.lr": 1e-5,
                "learner.advantage.success_weight": 0.0,
                "learner.advantage.decision_token": False,
                "learner.screen_success_variance": False,
            },
        ),
        RecipeArm("g4-lr3e-6", _aimed(4, 3e-6)),
        RecipeArm("g4-lr1e-5", _aimed(4, 1e-5)),
        RecipeArm("g4-lr1e-6", _aimed(4, 1e-6)),
        RecipeArm("g8-lr3e-6", _aimed(8, 3e-6)),
    )
}
BASELINE = "today"
"""The arm every other arm is also paired with."""


def resolve(names: str | None) -> list[RecipeArm]:
    if not names:
        return list(RECIPE_ARMS.values())
    arms = []
    for name in (n.strip() for n in names.split(",") if n.strip()):
        if name not in RECIPE_ARMS:
            raise CliError(f"unknown recipe arm {name!r}; known: {', '.join(RECIPE_ARMS)}")
        arms.append(RECIPE_ARMS[name])
    return arms


def rotated(arms: list[RecipeArm], block: int) -> list[RecipeArm]:
    """Block b runs the arms starting at position b (mod the count): over as many blocks as arms, every arm runs
    once in every position, so a drift in the machine's speed within a block does not favour one arm."""
    k = block % len(arms)
    return arms[k:] + arms[:k]
