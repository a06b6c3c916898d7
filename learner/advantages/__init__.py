"""Advantage estimators: one registry, one typed input (`AdvantageBatch`), one signature (docs/design.md#advantages).

    advantages, stats = estimate(name, batch_of(group), settings.advantage)   # stats: learner.step_stats.EstimatorStats

`AdvantageSettings` is the `learner.advantage` sub-model of `LearnerSettings`, re-exported here for estimators
registered by plug-ins.
"""

from learner.advantages import estimators as _estimators  # noqa: F401  (registers the built-ins)
from learner.advantages.batch import AdvantageBatch, MemberLayout, batch_of, layout_of
from learner.advantages.registry import (
    CHANNELS,
    ESTIMATORS,
    UnknownEstimatorError,
    estimate,
    get_estimator,
    register_estimator,
)
from learner.settings import AdvantageSettings

__all__ = [
    "AdvantageBatch",
    "AdvantageSettings",
    "CHANNELS",
    "ESTIMATORS",
    "MemberLayout",
    "UnknownEstimatorError",
    "batch_of",
    "estimate",
    "get_estimator",
    "layout_of",
    "register_estimator",
]
