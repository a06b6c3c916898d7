"""A server's side of the weight transport: follow the announcements, verify, fetch, hand the engine a verified
version (docs/design.md#weights). The one rollback every engine shares is `slca/weights/rollback.py`.

Sources: `POST /admin/weights` (a path) and the `slca:weights` channel (plus `slca:weights:latest` read at start,
and again after every reconnection). The engine loads in the background and swaps between two engine steps; requests
keep being served. A swap that fails midway is rolled back by the engine (`WeightRollback`) and counted twice:
`slca_swaps_total{outcome="failed"}` and `slca_swap_rollbacks_total`. The channel subscriber outlives any error: it
logs, waits, and subscribes again, so one bad notification never stops the next swaps.

The follower loads the newest announcement, never a backlog one by one: the subscriber checks each announcement
against the policy as it arrives and keeps the newest that passed (`WeightSwapper.wanted`); a separate loader task
swaps to it. Announcements that arrive while a version loads (a vLLM reload takes seconds) coalesce into the newest.
A failed swap is not the end of it: the loader tries again after a back-off (`swap_retry_s`, doubling up to
`swap_retry_max_s`), with the newest announcement by then (at once when a newer one arrives). A refused announcement
(bad signature, version guard) is not retried: the same bytes would be refused again.

Redis is not trusted (`ManifestPolicy`, slca/weights/verify.py): an announcement is loaded only when its manifest
carries the learner's signature, and only when its version is at most `max_version_jump` above the last announced
version this server accepted — a guard in depth against a pinned version (`2**62`) that would make every later
real version look old. A refused announcement is logged and counted (`slca_swaps_total{outcome="refused"}`); the
server keeps serving what it serves.

The signature covers the announcement, not the files: the transport fetches the announced version (in place on a
shared disk, or over HTTP into a local copy) and the engine is handed it with the announced manifest, against which
its bytes are verified as they are loaded — so whoever can write the weights directory (or answer for the learner's
address) but not the key cannot swap other files in. `POST /admin/weights` names only a path: when the server has a
key, the directory's manifest must carry a valid signature and the requested version.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any, Callable, Protocol

from redis.exceptions import RedisError

from slca.cancel import raise_if_cancelling
from slca.contracts import ContractError, Streams, WeightManifest
from slca.contracts.wire import validate
from slca.weights.disk import DiskTransport
from slca.weights.errors import WeightLoadError, WeightRollback
from slca.weights.verify import ManifestPolicy, WeightVersion

log = logging.getLogger(__name__)


class SwapTarget(Protocol):
    """What the swapper needs of an engine."""

    version: int

    async def swap_weights(self, weights: WeightVersion) -> float:
        """Load `weights` (verified bytes only), swap them in between steps; seconds; raises WeightLoadError."""
        ...


class WeightSwapper:
    """One swap at a time, old version kept on failure, latency and outcome in `metrics` (the server's: `swaps`
    by outcome, `swap_rollbacks`, `swap_seconds`, `policy_version`)."""

    def __init__(
        self,
        engine: SwapTarget,
        metrics: Any,
        retry_s: float = 2.0,
        policy: ManifestPolicy | None = None,
        transport=None,
        swap_retry_s: float = 1.0,
        swap_retry_max_s: float = 60.0,
        after_swap: Callable[[], object] | None = None,
    ):
        self.engine = engine
        self.after_swap = after_swap
        """Run in a worker thread after every swap attempt, done or failed (serve: `slca.heap.trim`, giving back
        what the old version's tensors and the reading left in malloc's arenas)."""
        self.metrics = metrics
        self.retry_s = retry_s
        """Wait before re-subscribing after an error of the channel loop."""
        self.policy = policy or ManifestPolicy()
        """Announcements are checked against it; the default refuses them all (a server must be given a key)."""
        self.transport = transport or DiskTransport()
        """How an announced version reaches this machine (`slca.weights.transport_for_server`)."""
        self.last_accepted: int | None = None
        """Version of the last announcement that passed the policy (the base of the version-jump guard)."""
        self.last_error: str | None = None
        self.last_seconds: float | None = None
        self.last_outcome: str = "none"
        """How the last swap attempt ended: 'none' (none yet), 'ok', 'failed' or 'refused' (the labels of
        `slca_swaps_total`); with `last_outcome_version` and `last_outcome_at`, what a replica announces."""
        self.last_outcome_version: int | None = None
        self.last_outcome_at: float | None = None
        self.on_outcome: Callable[[], None] | None = None
        """Called on the event loop after every swap outcome (serve re-announces its status at once)."""
        self.swap_retry_s = swap_retry_s
        """After a failed swap of an announced version, the follower tries again after this long (the newest
        announcement by then), doubling after each further failure of the same version."""
        self.swap_retry_max_s = swap_retry_max_s
        """Upper bound of that back-off."""
        self.wanted: WeightManifest | None = None
        """The newest announcement that passed the policy and is above the served version: what the follower's
        loader swaps to next (None: nothing to do)."""
        self._wanted_changed = asyncio.Event()
        # Swaps are serialised: two versions loading at once would race on which ends up serving.
        self._lock = asyncio.Lock()
        metrics.policy_version.set(engine.version)

    async def swap(self, version: int, path: str | None = None, manifest: WeightManifest | None = None) -> float:
        """Seconds the swap took; raises WeightLoadError (old version still serving) with the reason. `manifest`:
        the announcement that passed the policy, fetched by the transport; None: an admin request for `path`,
        checked by `ManifestPolicy.signed_on_disk`."""
        async with self._lock:
            if version == self.engine.version:
                return 0.0
            where = path if manifest is None else (manifest.url or manifest.path)
            loop = asyncio.get_running_loop()
            try:
                if manifest is None:
                    signed = await loop.run_in_executor(None, self.policy.signed_on_disk, path, version)
                    weights = WeightVersion(str(path), version, signed)
                else:
                    weights = await loop.run_in_executor(None, self.transport.fetch, manifest)
                seconds = await self.engine.swap_weights(weights)
            except Exception as exc:  # any failure is a failed swap; the engine keeps (or restored) the old one
                error = exc if isinstance(exc, WeightLoadError) else WeightLoadError(f"{where}: {exc!r}")
                self.last_error = str(error)
                self.metrics.swaps.labels(outcome="failed").inc()
                self._settled("failed", version)
                if isinstance(exc, WeightRollback):
                    self.metrics.swap_rollbacks.inc()
                log.warning("weight swap to v%s failed, still serving v%s: %s", version, self.engine.version, error)
                if error is exc:
                    raise
                raise error from exc
            finally:
                self.transport.retain({self.engine.version})  # a local copy of what is served, nothing more
                if self.after_swap is not None:
                    await loop.run_in_executor(None, self.after_swap)
            self.last_error, self.last_seconds = None, seconds
            self.metrics.swaps.labels(outcome="ok").inc()
            self.metrics.swap_seconds.observe(seconds)
            self.metrics.policy_version.set(version)
            self._settled("ok", version)
            log.info("now serving weights v%s (swap %.2fs)", version, seconds)
            return seconds

    def accept(self, raw: bytes | str) -> WeightManifest | None:
        """The announcement in `raw` when it may be loaded: a valid manifest, not older than the version served,
        passing the policy (`last_accepted` moves to it). None otherwise; a refusal is logged and counted, never
        raised (a manifest the policy cannot even check, whatever the reason, is refused like a forged one)."""
        try:
            manifest = validate(WeightManifest, json.loads(raw))
        except (ContractError, ValueError) as exc:
            log.warning("ignoring weight notification: %s", exc)
            return None
        if manifest.version < self.engine.version:
            return None  # an older version published late: never go back
        try:
            refusal = self.policy.refusal(manifest, self.last_accepted)
        except Exception as exc:  # a manifest the check chokes on is not one to load
            refusal = f"unverifiable ({exc!r})"
        if refusal:
            self.last_error = f"weight announcement v{manifest.version} refused: {refusal}"
            self.metrics.swaps.labels(outcome="refused").inc()
            log.warning("%s; still serving v%s", self.last_error, self.engine.version)
            self._settled("refused", manifest.version)
            return None
        self.last_accepted = manifest.version
        return manifest

    def offer(self, raw: bytes | str) -> None:
        """An announcement from the channel: when accepted and newer than what the loader is after, it becomes
        `wanted` (older ones waiting are dropped: only the newest is loaded)."""
        manifest = self.accept(raw)
        if manifest is None or manifest.version <= self.engine.version:
            return
        if self.wanted is None or manifest.version > self.wanted.version:
            self.wanted = manifest
            self._wanted_changed.set()

    async def swap_manifest(self, raw: bytes | str) -> None:
        """Apply one published manifest now; a bad one is logged, never raised (the follower uses `offer` and its
        loader instead, which coalesce a backlog and retry a failed swap)."""
        manifest = self.accept(raw)
        if manifest is None:
            return
        try:
            await self.swap(manifest.version, manifest.path, manifest)
        except WeightLoadError:
            return  # counted and logged by swap()

    def retry_delay(self, failures: int) -> float:
        """Back-off before the next try after `failures` failed swaps of the same version in a row."""
        return min(self.swap_retry_max_s, self.swap_retry_s * 2 ** max(0, failures - 1))

    async def load_wanted(self) -> None:
        """Background task of the follower: swap to `wanted` whenever it changes; after a failed swap, wait the
        back-off (or until a newer announcement arrives) and try the newest again. Never dies of an error."""
        failed_version, failures = None, 0
        while True:
            await self._wanted_changed.wait()
            self._wanted_changed.clear()
            manifest = self.wanted
            if manifest is None or manifest.version <= self.engine.version:
                continue
            if await self._wait_swappable():  # announcements that came while the engine was held: the newest
                manifest = self.wanted or manifest
                if manifest.version <= self.engine.version:
                    continue
            if not await self._try_swap(manifest):
                failures = failures + 1 if manifest.version == failed_version else 1
                failed_version = manifest.version
                await self._retry_later(manifest.version, self.retry_delay(failures))
                continue
            failed_version, failures = None, 0
            if self.wanted is manifest:
                self.wanted = None

    async def _wait_swappable(self) -> bool:
        """Wait while the engine may not swap (a candidate held while the gate judges it: serve/version_hold.py), before
        fetching anything, so that the newest announcement is loaded once it may — not each one that waited, one swap
        after another. True when it waited. Engines without holds (no `swappable`) never wait."""
        swappable = getattr(self.engine, "swappable", None)
        return bool(await swappable()) if swappable is not None else False

    async def _try_swap(self, manifest: WeightManifest) -> bool:
        """Swap to an accepted announcement; False when it failed (counted and logged by `swap`)."""
        try:
            await self.swap(manifest.version, manifest.path, manifest)
        except WeightLoadError:
            return False
        except Exception:  # swap() turns every failure into a WeightLoadError: this is a bug, and it must not end
            log.exception("weight loader failed on v%s", manifest.version)  # the loader
            return False
        return True

    async def _retry_later(self, version: int, delay: float) -> None:
        """Wait `delay` seconds, or less when an announcement newer than `version` arrives; then wake the loader."""
        log.warning("weight swap to v%s: trying again in %.1fs (or at the next announcement)", version, delay)
        try:
            await asyncio.wait_for(self._wanted_changed.wait(), delay)
        except TimeoutError:
            pass
        self._wanted_changed.set()

    def _settled(self, outcome: str, version: int) -> None:
        self.last_outcome, self.last_outcome_version, self.last_outcome_at = outcome, version, time.time()
        if self.on_outcome is not None:
            try:
                self.on_outcome()
            except Exception:  # a listener's bug must not turn a swap into a failure
                log.exception("swap outcome listener failed")

    async def follow(self, client, streams: Streams) -> None:
        """Background task: the newest published version at start, then the newest of the notifications (`offer`),
        loaded by a task of its own (`load_wanted`); never dies of an error (only of cancellation): whatever went
        wrong is logged, and it subscribes again (reading `slca:weights:latest` again: a missed announcement)."""
        loader = asyncio.create_task(self.load_wanted(), name="weights-loader")
        try:
            await self._listen(client, streams)
        finally:
            loader.cancel()
            await asyncio.wait({loader})

    async def _listen(self, client, streams: Streams) -> None:
        while True:
            pubsub = None
            try:
                latest = await client.get(streams.weights_latest)
                raise_if_cancelling()  # a stop absorbed by that command: do not go on into listen()
                if latest:
                    self.offer(latest)
                pubsub = client.pubsub()
                await pubsub.subscribe(streams.weights_channel)
                raise_if_cancelling()
                async for message in pubsub.listen():
                    raise_if_cancelling()
                    if message.get("type") == "message":
                        self.offer(message["data"])
            except RedisError as exc:  # Redis went away: retry, keep serving the current version
                log.warning("weight channel: %s; retrying in %.1fs", exc, self.retry_s)
            except Exception:  # a bug or a surprise must not end weight swaps for the life of the server
                log.exception("weight channel failed; retrying in %.1fs", self.retry_s)
            finally:
                if pubsub is not None:
                    await _close_quietly(pubsub)
            await asyncio.sleep(self.retry_s)


async def _close_quietly(pubsub) -> None:
    try:
        await pubsub.aclose()
    except Exception as exc:  # the connection may be the thing that failed
        log.debug("closing the weight subscription: %s", exc)
