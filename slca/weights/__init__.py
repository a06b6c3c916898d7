"""The weight transport: how a weight version goes from the learner to every server (docs/design.md#weights).

One package owns it, used by the learner, `slca train`, the benches and every engine:
- publishing (`publish.py`): write vN atomically with its signed manifest, announce it on Redis, prune old ones;
- verifying and loading (`verify.py`): the announcement's signature and version guard (`ManifestPolicy`), the
  directory against the announced manifest, and `WeightVersion`, whose tensors are parsed from the very bytes that
  were hashed (every engine, vLLM's engine-core worker included, loads through it);
- one class per transport, each with the learner's side (`connect`, `url_for`, `close`) and a server's (`fetch`,
  `retain`, `stats`): `DiskTransport` (`disk.py`: in place, one machine; the default) and `HttpTransport`
  (`http.py`: the learner serves its versions, servers on other hosts fetch them into a verified local copy);
  `transports.py` registers both sides of each transport by name (`register_transport`), and builds a server's
  (`for_server`) and the learner's (`for_learner`) from `weights.transport`; an HTTP fetch reports what it did
  (`FetchReport`, `fetch_report.py`) to an observer a server passes in (serve's `slca_weights_fetch_*` metrics);
  a version known by number only (a promotion, a pin) is fetched by `fetch_by_number` (its manifest from the
  learner's `weights.url`, checked like an announcement, then the same `fetch`);
- a server's side (`swap.py`): `WeightSwapper` follows the announcements, fetches and hands the engine a verified
  version;
- the one rollback of a failed swap, every engine's (`rollback.py`: `load_or_roll_back`);
- the `[weights]` settings section, which both sides read (`settings.py`: `WeightsSettings`).
"""

from slca.weights.disk import DiskTransport, TransportStats
from slca.weights.errors import FetchError, WeightLoadError, WeightRollback, WeightRollbackFailed
from slca.weights.fetch_report import FETCH_FAILURES, FetchFailure, FetchObserver, FetchReport
from slca.weights.http import HttpTransport, fetch_token
from slca.weights.publish import (
    announce,
    existing_versions,
    next_version,
    prune_versions,
    publish,
    reannounce_refusal,
    stored_manifest,
    write_version,
)
from slca.weights.rollback import load_or_roll_back, run_sync
from slca.weights.swap import SwapTarget, WeightSwapper
from slca.weights.settings import WeightsSettings
from slca.weights.transports import (
    LEARNER_TRANSPORTS,
    TRANSPORTS,
    AutoTransport,
    LearnerOptions,
    LearnerTransport,
    ServerOptions,
    ServerTransport,
    UnknownTransportError,
    fetch_by_number,
    fetches_by_number,
    for_learner,
    for_server,
    register_transport,
    transport_names,
)
from slca.weights.verify import (
    ManifestPolicy,
    WeightDir,
    WeightVersion,
    check_weight_dir,
    load_state_dict,
    manifest_mismatch,
    open_weight_dir,
)

__all__ = [
    "LEARNER_TRANSPORTS",
    "LearnerOptions",
    "LearnerTransport",
    "TRANSPORTS",
    "WeightsSettings",
    "ServerOptions",
    "ServerTransport",
    "UnknownTransportError",
    "register_transport",
    "transport_names",
    "AutoTransport",
    "DiskTransport",
    "FETCH_FAILURES",
    "FetchError",
    "FetchFailure",
    "FetchObserver",
    "FetchReport",
    "HttpTransport",
    "ManifestPolicy",
    "SwapTarget",
    "TransportStats",
    "WeightDir",
    "WeightLoadError",
    "WeightRollback",
    "WeightRollbackFailed",
    "WeightSwapper",
    "WeightVersion",
    "announce",
    "check_weight_dir",
    "existing_versions",
    "fetch_by_number",
    "fetch_token",
    "fetches_by_number",
    "for_learner",
    "for_server",
    "load_or_roll_back",
    "load_state_dict",
    "manifest_mismatch",
    "next_version",
    "open_weight_dir",
    "prune_versions",
    "publish",
    "reannounce_refusal",
    "run_sync",
    "stored_manifest",
    "write_version",
]
