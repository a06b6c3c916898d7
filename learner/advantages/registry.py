"""One registry of advantage estimators: `estimate(batch, config) -> (advantages per member, EstimatorStats)`.

Every call site goes through `get_estimator(name)` (or `estimate`); an unknown name raises listing the known ones.
An estimator declares the channels it reports (`register_estimator(name, channels=…)`): the figures of a step are
keyed by them (`learner.step_stats.EstimatorStats`), and so are the Prometheus label and the dashboard's series."""

from __future__ import annotations

from typing import Callable, Protocol

import torch

from learner.advantages.batch import AdvantageBatch
from learner.settings import AdvantageSettings
from learner.step_stats import EstimatorStats


class Estimator(Protocol):
    def __call__(
        self, batch: AdvantageBatch, config: AdvantageSettings
    ) -> tuple[list[torch.Tensor], EstimatorStats]: ...


class UnknownEstimatorError(KeyError):
    """An estimator name that is not registered; the message lists the known ones."""

    def __str__(self) -> str:
        return str(self.args[0])


ESTIMATORS: dict[str, Estimator] = {}
CHANNELS: dict[str, frozenset[str]] = {}
"""Estimator name → the channels it reports (those registered with `channels`)."""


def register_estimator(name: str, channels: tuple[str, ...] = ()) -> Callable[[Estimator], Estimator]:
    def deco(fn: Estimator) -> Estimator:
        if name in ESTIMATORS:
            raise ValueError(f"estimator {name!r} registered twice")
        ESTIMATORS[name] = fn
        if channels:
            CHANNELS[name] = frozenset(channels)
        return fn

    return deco


def get_estimator(name: str) -> Estimator:
    try:
        return ESTIMATORS[name]
    except KeyError:
        raise UnknownEstimatorError(
            f"unknown advantage estimator {name!r}; known: {', '.join(sorted(ESTIMATORS))}"
        ) from None


def estimate(name: str, batch: AdvantageBatch, config: AdvantageSettings) -> tuple[list[torch.Tensor], EstimatorStats]:
    """The registered estimator `name` on `batch`; a channel it did not declare is an error (a typo would otherwise
    start a new dashboard series)."""
    advantages, stats = get_estimator(name)(batch, config)
    declared = CHANNELS.get(name)
    if declared is not None and not set(stats.channels) <= declared:
        raise ValueError(
            f"estimator {name!r} reported channels {sorted(set(stats.channels) - declared)} it did not declare "
            f"({', '.join(sorted(declared))})"
        )
    return advantages, stats
