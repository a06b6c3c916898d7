"""The arms of the recipe sweep (`slca bench recipe`): a name → the estimator and the settings it trains with.

One table, no branches: an arm is `slca train` with these `--set` overrides. Every arm trains for the same
minutes on the same fixed training tasks from the same warm start; what differs is only what the row says.

- `today`: what `make run` trained with before the sweep (one task's group of 8 per step, AdamW at 1e-5, the
  exec channel as the paper defines it, no screening, the decision token off).
- the `g*` rows: several groups per step, an exec channel that pays `success` too, the decision not to call
  credited on no-tool tasks, groups without success variance screened out — at three learning rates and two
  batch sizes (one factor at a time around `g4-lr3e-6`).

A second arm set, `estimators` (`--arm-set estimators`), runs the five estimator arms of issue 35 at one recipe
(`--recipe`, a row above; default `RECIPE_FOR_ESTIMATORS`): the recipe's settings with the estimator and its
advantage knobs of `ops.experiments.learning.arms` (`slca_decision`: slca with the decision token; the others
with it off, as the estimators are defined). A third, `tools` (`--arm-set tools`, issue 38), trains one recipe
(`--recipe`, default `RECIPE_FOR_TOOLS`) twice: its rollouts' tool calls answered by the pack's real tools (`real`)
or by SGLS (`sgls`: `slca train --tools sgls`), every setting identical. Each arm set has blocks of its own
(`ArmSet.blocks`), the same block structure, and its own baseline.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ops.experiments.learning.arms import VARIANTS
from ops.experiments.train.cli import TOOL_SOURCES
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
    tools: str = "real"
    """Who answers the training rollouts' tool calls (`slca train --tools`: `TOOL_SOURCES`), never the evaluation's:
    it always uses the tools as the pack's tasks offer them (the real ones for real)."""

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

ESTIMATORS = ("slca", "slca_decision", "grpo", "toolpo", "rltr")
"""The estimator arms (issue 35 item 3), fixed before the first block: a plug-in registered later does not join a
running comparison. `slca` first: the reference every other arm is compared with."""
RECIPE_FOR_ESTIMATORS = "g4-lr3e-6"
"""The recipe the estimator arms train with unless `--recipe` says otherwise: the best recipe arm of block 0
(bench/learning/recipe): 4 groups per step, lr 3e-6, the aimed advantage."""


def _recipe(recipe: str, arm_set: str) -> RecipeArm:
    if recipe not in RECIPE_ARMS:
        raise CliError(f"unknown recipe {recipe!r} for the {arm_set} arms; known: {', '.join(RECIPE_ARMS)}")
    return RECIPE_ARMS[recipe]


def estimator_arms(recipe: str) -> dict[str, RecipeArm]:
    """The five estimator arms at the recipe arm `recipe`: its settings, the decision token off unless the
    estimator arm sets it (`arms.VARIANTS`: `slca_decision`), the arm's registered estimator."""
    _recipe(recipe, "estimator")
    base = {**RECIPE_ARMS[recipe].settings, "learner.advantage.decision_token": False}
    arms = {}
    for name in ESTIMATORS:
        variant = VARIANTS.get(name)
        estimator = variant.estimator if variant else name
        knobs = {f"learner.advantage.{k}": v for k, v in (variant.advantage if variant else {}).items()}
        arms[name] = RecipeArm(name, {**base, **knobs}, estimator)
    return arms


RECIPE_FOR_TOOLS = "g4-lr1e-5"
"""The recipe the tool-source arms train with unless `--recipe` says otherwise: the learner's default recipe."""
SGLS_SETTINGS = {"sim.backend": "schema"}
"""SGLS as shipped (`make run`'s serve): the schema backend; the world seed is the configured `sim.world_seed`, as
`slca up` hands it to serve (default: none). Both arms carry these: in `real` they answer only the pack's own
simulated tools (the catalog's, `x-mode: simulated`), which both arms share — the tool source is the one difference."""


def tool_arms(recipe: str) -> dict[str, RecipeArm]:
    """`real` and `sgls` at the recipe arm `recipe`: the same settings and estimator, the rollouts' tool calls
    answered by the pack's real tools or by SGLS (`TOOL_SOURCES`)."""
    settings = {**_recipe(recipe, "tools").settings, **SGLS_SETTINGS}
    return {source: RecipeArm(source, dict(settings), tools=source) for source in TOOL_SOURCES}


@dataclass(frozen=True)
class ArmSet:
    """A family of arms run in blocks: every arm once per block, order rotated, paired with the block's warm start
    (and, in the report, with the set's reference arm: `BASELINE`, `ESTIMATORS[0]`)."""

    name: str
    blocks: str
    """The folder under `--out` that holds this set's blocks (`<out>/<blocks>/b<N>`)."""
    arms: Callable[[str], dict[str, RecipeArm]]
    """The recipe (a `RECIPE_ARMS` name, for the sets that train at one) → the arms."""
    recipe: str | None = None
    """The arms train at this recipe unless `--recipe` names another (None: not at one recipe); its name is part of
    the block (block.json `recipe`)."""

    @property
    def at_recipe(self) -> bool:
        return self.recipe is not None


ARM_SETS: dict[str, ArmSet] = {
    s.name: s
    for s in (
        ArmSet("recipe", "blocks", lambda recipe: RECIPE_ARMS),
        ArmSet("estimators", "estimator-blocks", estimator_arms, RECIPE_FOR_ESTIMATORS),
        ArmSet("tools", "tools-blocks", tool_arms, RECIPE_FOR_TOOLS),
    )
}
"""`--arm-set`: `recipe` (the default: the sweep of `RECIPE_ARMS`), `estimators` or `tools`."""


def arm_set(name: str) -> ArmSet:
    if name not in ARM_SETS:
        raise CliError(f"unknown arm set {name!r}; known: {', '.join(ARM_SETS)}")
    return ARM_SETS[name]


def resolve(names: str | None, known: dict[str, RecipeArm] | None = None) -> list[RecipeArm]:
    """The arms named in `names` (comma-separated, in that order) among `known` (default: `RECIPE_ARMS`); every
    one of them when empty."""
    known = RECIPE_ARMS if known is None else known
    if not names:
        return list(known.values())
    arms = []
    for name in (n.strip() for n in names.split(",") if n.strip()):
        if name not in known:
            raise CliError(f"unknown recipe arm {name!r}; known: {', '.join(known)}")
        arms.append(known[name])
    return arms


def rotated(arms: list[RecipeArm], block: int) -> list[RecipeArm]:
    """Block b runs the arms starting at position b (mod the count): over as many blocks as arms, every arm runs
    once in every position, so a drift in the machine's speed within a block does not favour one arm."""
    k = block % len(arms)
    return arms[k:] + arms[:k]
