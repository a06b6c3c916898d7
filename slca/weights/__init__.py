"""The weight transport: how a weight version goes from the learner to every server (docs/design.md#weights).

One package owns it, used by the learner, `slca train`, the benches and every engine:
- publishing (`publish.py`): write vN atomically with its signed manifest, announce it on Redis, prune old ones;
- verifying and loading (`verify.py`): the announcement's signature and version guard (`ManifestPolicy`), the
  directory against the announced manifest, and the tensors parsed from the very bytes that were hashed.
"""

from slca.weights.errors import WeightLoadError, WeightRollback, WeightRollbackFailed
from slca.weights.publish import announce, existing_versions, next_version, prune_versions, publish, write_version
from slca.weights.verify import (
    ManifestPolicy,
    WeightDir,
    check_weight_dir,
    load_state_dict,
    manifest_mismatch,
    open_weight_dir,
)

__all__ = [
    "ManifestPolicy",
    "WeightDir",
    "WeightLoadError",
    "WeightRollback",
    "WeightRollbackFailed",
    "announce",
    "check_weight_dir",
    "existing_versions",
    "load_state_dict",
    "manifest_mismatch",
    "next_version",
    "open_weight_dir",
    "prune_versions",
    "publish",
    "write_version",
]
