"""One registry of advantage estimators: `estimate(batch, config) -> (advantages per member, metrics)`.

Every call site goes through `get_estimator(name)`; an unknown name raises listing the known ones."""

from __future__ import annotations

from typing import Callable, Protocol

import torch

from learner.advantages.batch import AdvantageBatch
from learner.settings import AdvantageSettings


class Estimator(Protocol):
    def __call__(
        self, batch: AdvantageBatch, config: AdvantageSettings
    ) -> tuple[list[torch.Tensor], dict[str, float]]: ...


class UnknownEstimatorError(KeyError):
    """An estimator name that is not registered; the message lists the known ones."""

    def __str__(self) -> str:
        return str(self.args[0])


ESTIMATORS: dict[str, Estimator] = {}


def register_estimator(name: str) -> Callable[[Estimator], Estimator]:
    def deco(fn: Estimator) -> Estimator:
        if name in ESTIMATORS:
            raise ValueError(f"estimator {name!r} registered twice")
        ESTIMATORS[name] = fn
        return fn

    return deco


def get_estimator(name: str) -> Estimator:
    try:
        return ESTIMATORS[name]
    except KeyError:
        raise UnknownEstimatorError(
            f"unknown advantage estimator {name!r}; known: {', '.join(sorted(ESTIMATORS))}"
        ) from None
