"""What one weight fetch over HTTP did, handed to whoever counts it (serve's `slca_weights_fetch_*` metrics).

The transport lives in `slca/` and may not import a component, so it does not count into Prometheus itself: it
hands a `FetchReport` to an observer it is given (`HttpTransport(observer=...)`; serve passes
`ServeMetrics.observe_fetch`). Failure reasons are a fixed set, so that a metric labelled by them stays bounded
whatever a learner (or whoever answers for its address) sends back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal

FetchFailure = Literal[
    "no_url", "unreachable", "timeout", "http_status", "bad_response", "too_large", "checksum", "invalid_copy", "io"
]
"""Why a fetch failed: `no_url` (nothing to fetch from), `unreachable` (no connection), `timeout` (the learner did
not answer for `weights.fetch_timeout_s`), `http_status` (403: wrong token, 404: not listed or pruned…),
`bad_response` (a malformed response), `too_large` (past `weights.fetch_max_bytes`), `checksum` (a file's
bytes differ from the signed manifest), `invalid_copy` (the fetched copy fails the structural checks against the
manifest), `io` (writing the local copy failed)."""
FETCH_FAILURES: tuple[FetchFailure, ...] = FetchFailure.__args__

REFUSING: frozenset[FetchFailure] = frozenset({"too_large", "checksum", "invalid_copy"})
"""Failures that refuse the version for what was sent (its bytes do not match the signed manifest), as opposed to
the network or the local disk failing: such a version is counted `refused`, not retried as a glitch would be."""


@dataclass(frozen=True)
class FetchReport:
    version: int
    bytes: int
    """Bytes received over the network (a failed fetch counts what arrived before it failed)."""
    seconds: float
    downloaded: bool
    """False when a local copy of exactly this announcement was reused (nothing went over the network)."""
    failure: FetchFailure | None = None

    @property
    def verified(self) -> bool:
        """Every file of the version matched the signed manifest."""
        return self.failure is None

    @property
    def refused(self) -> bool:
        return self.failure in REFUSING


FetchObserver = Callable[[FetchReport], None]
