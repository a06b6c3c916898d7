"""What a weight load can fail with (docs/design.md#weights). The server keeps serving its last good version."""

from __future__ import annotations


class WeightLoadError(RuntimeError):
    """A weight version could not be fetched, verified or loaded; the previous version keeps serving."""


class FetchError(WeightLoadError):
    """A version could not be fetched (HTTP transport); `reason` is one of `slca.weights.fetch_report.FETCH_FAILURES`
    (a bounded metric label)."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class WeightRollback(WeightLoadError):
    """The load failed after it may have begun replacing weights; the last good version was restored."""


class WeightRollbackFailed(WeightLoadError):
    """Neither the new version nor the last good one could be loaded back: the engine holds an unknown mix of
    weights and must not serve another token from it (the engine's failure path takes over)."""
