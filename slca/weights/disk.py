"""The disk transport: a version is the directory the learner wrote, read in place (one machine, or a filesystem the
learner and the servers share). The default; `slca/weights/http.py` is the one for servers on other hosts."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from slca.contracts import WeightManifest
from slca.weights.verify import WeightVersion, open_weight_dir


@dataclass
class TransportStats:
    """What a transport did, for logs and tests: versions fetched, bytes moved, seconds spent, failures."""

    fetches: int = 0
    bytes: int = 0
    seconds: float = 0.0
    failures: int = 0


class DiskTransport:
    """Versions as `<weights_dir>/v<N>/` directories (written by `slca.weights.publish`), read where they lie."""

    name = "disk"

    def __init__(self) -> None:
        self.stats = TransportStats()

    # --- the learner's side -----------------------------------------------------------------------
    def connect(self) -> None:
        """Nothing to start: the files are where the learner wrote them."""

    def url_for(self, version: int) -> str | None:
        """Where servers fetch version `version` from, announced in its (signed) manifest: none, its `path`."""
        return None

    # --- a server's side ----------------------------------------------------------------------------
    def can_fetch(self, manifest: WeightManifest) -> bool:
        return Path(manifest.path).is_dir()

    def fetch(self, manifest: WeightManifest) -> WeightVersion:
        """The announced version where it lies, after the structural checks against the announced manifest (its
        files are hashed when loaded, from the bytes loaded); WeightLoadError says why not."""
        try:
            open_weight_dir(manifest.path, manifest)
        except Exception:
            self.stats.failures += 1
            raise
        self.stats.fetches += 1
        return WeightVersion(manifest.path, manifest.version, manifest)

    def retain(self, versions: set[int]) -> None:
        """Nothing of ours to drop: the learner prunes its own directory."""

    def close(self) -> None:
        pass
