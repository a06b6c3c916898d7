"""The one rollback of a failed swap, shared by every engine (docs/design.md#weights).

An engine that replaces its weights in place can fail midway (out of memory converting a tensor, an assignment
that raises, vLLM's loader dying after some layers): the model then holds two versions mixed. Every engine hands
`load_or_roll_back` a `load(version)` of its own (hf: assign the verified tensors, or the references it kept of the
last good ones; vLLM: load the verified tensors, or the last good version through the same verified path) and
gets back None or the error once the last good weights are back — so what a failed swap leaves serving, and how it
is reported (`WeightRollback`, counted as `slca_swap_rollbacks_total`; `WeightRollbackFailed` when nothing good is
left), is the same on every engine."""

from __future__ import annotations

import logging
from typing import Any, Awaitable, Callable, Coroutine, TypeVar

from slca.weights.errors import WeightLoadError, WeightRollback, WeightRollbackFailed
from slca.weights.verify import WeightVersion

log = logging.getLogger(__name__)

T = TypeVar("T")


async def load_or_roll_back(
    new: WeightVersion | None,
    good: WeightVersion | None,
    good_version: int,
    load: Callable[[WeightVersion | None], Awaitable[None]],
) -> WeightLoadError | None:
    """Load `new` in place (`load(new)`; None: the model directory, v0 — a rollback to the base model in an engine
    that cannot have a sibling); None, or the error once the last good weights are back.

    A load that fails midway leaves two versions mixed: the last good weights (`good`; None: the model directory,
    v0) are then loaded again (`load(good)`). Should that fail too, WeightRollbackFailed: nothing good is left to
    serve, and the new version is not claimed."""
    try:
        await load(new)
    except Exception as exc:
        where = _where(good)
        log.warning("loading v%s from %s failed (%s); reloading v%s from %s", _version(new), _where(new), exc,
                    good_version, where)  # fmt: skip
        try:
            await load(good)
        except Exception as again:
            log.critical("restoring v%s from %s failed too: %s", good_version, where, again)
            return WeightRollbackFailed(
                f"{_where(new)}: reload failed ({exc}); restoring v{good_version} failed ({again})"
            )
        return WeightRollback(f"{_where(new)}: reload failed ({exc}); v{good_version} restored")
    return None


def _where(weights: WeightVersion | None) -> str:
    return weights.root if weights is not None else "the model directory"


def _version(weights: WeightVersion | None) -> int:
    return weights.version if weights is not None else 0


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """The result of a coroutine that never suspends (every await in it is of an `async def` over synchronous
    calls), on a thread with no event loop: how an engine's own thread (hf's torch thread, the in-process vLLM
    driver) runs the shared rollback."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise RuntimeError("run_sync: the coroutine suspended (it awaited real asynchronous work)")
