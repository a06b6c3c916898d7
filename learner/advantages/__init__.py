"""Advantage estimators: one registry, one typed input (`AdvantageBatch`), one signature (docs/design.md#advantages).

    advantages, metrics = get_estimator(name)(batch_of(group), settings.advantage)

`AdvantageSettings` is the `learner.advantage` sub-model of `LearnerSettings`, re-exported here for estimators
registered by plug-ins.
"""

from learner.advantages import estimators as _estimators  # noqa: F401  (registers the built-ins)
from learner.advantages.batch import AdvantageBatch, MemberLayout, batch_of, layout_of
from learner.advantages.registry import ESTIMATORS, UnknownEstimatorError, get_estimator, register_estimator
from learner.settings import AdvantageSettings

__all__ = [
    "AdvantageBatch",
    "AdvantageSettings",
    "ESTIMATORS",
    "MemberLayout",
    "UnknownEstimatorError",
    "batch_of",
    "get_estimator",
    "layout_of",
    "register_estimator",
]
