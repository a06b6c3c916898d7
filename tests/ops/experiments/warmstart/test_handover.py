"""The warm start handed over as a weight version (ops/experiments/warmstart/handover.py): published after every
version on disk, signed so that serve verifies it, promoted before it is announced, and confirmed served; its
progress record (progress.py) reads the same from the file and from Redis."""

from __future__ import annotations

import json

import pytest

from ops.experiments.warmstart.handover import HandoverError, hand_over, publish_model_dir
from ops.experiments.warmstart.progress import ProgressBoard, parse_record, read_record, record_key
from serve.version_store import VersionStore, VersionUnverified
from slca.contracts import Streams, WeightManifest
from slca.weights import ManifestPolicy

KEY = "k" * 32


def test_the_warm_start_is_published_after_every_version_on_disk_and_verifies(tmp_path, tiny_model_dir):
    (tmp_path / "weights" / "v4").mkdir(parents=True)  # an earlier run's version, even without its manifest
    manifest = publish_model_dir(tiny_model_dir, tmp_path, KEY)
    assert manifest.version == 5 and manifest.signature_valid(KEY)
    assert {"model.safetensors", "config.json", "tokenizer.json"} <= set(manifest.sha256)
    weights = VersionStore(tmp_path, ManifestPolicy(KEY)).resolve(5)  # what a promotion or a pin checks
    assert weights.version == 5
    with pytest.raises(VersionUnverified):
        VersionStore(tmp_path, ManifestPolicy("another key" * 3)).resolve(5)


def test_publishing_a_directory_without_weights_is_refused(tmp_path):
    (tmp_path / "model").mkdir()
    with pytest.raises(HandoverError, match="no model.safetensors"):
        publish_model_dir(tmp_path / "model", tmp_path, KEY)


class FakeServe:
    """serve as the warm start sees it: ready after a while; a promotion, then the announced version swapped in."""

    url = "http://serve"

    def __init__(self, redis_client, streams: Streams, refuse: bool = False, swaps: bool = True) -> None:
        self.redis, self.streams, self.refuse, self.swaps = redis_client, streams, refuse, swaps
        self.calls: list[str] = []
        self.state = {"promoted": 0, "candidate": 0}
        self.polls = 0

    def ready(self) -> bool:
        self.polls += 1
        return self.polls > 2

    def promote(self, version: int):
        announced = self.redis.get(self.streams.weights_latest)
        self.calls.append(f"promote v{version} ({'after' if announced else 'before'} the announcement)")
        if self.refuse:
            return 422, {"error": {"message": "version_unverified"}}
        self.state["promoted"] = version
        return 200, {"promoted": version}

    def versions(self) -> dict:
        latest = self.redis.get(self.streams.weights_latest)
        if latest and self.swaps:
            self.state["candidate"] = WeightManifest.model_validate_json(latest).version
        return dict(self.state)


def _manifest(version: int) -> WeightManifest:
    return WeightManifest(version=version, path=f"/w/v{version}", sha256={"model.safetensors": "0" * 64},
                          base_model="m").signed(KEY)  # fmt: skip


def test_hand_over_promotes_before_it_announces_and_waits_until_served(redis_client):
    streams = Streams("hand")
    serve = FakeServe(redis_client, streams)
    assert hand_over(_manifest(1), serve, redis_client, streams, timeout_s=5, poll_s=0.01)
    assert serve.calls == ["promote v1 (before the announcement)"] and serve.polls == 3
    assert serve.state == {"promoted": 1, "candidate": 1}
    assert WeightManifest.model_validate_json(redis_client.get(streams.weights_latest)).version == 1


def test_hand_over_reports_a_refused_promotion_and_an_unconfirmed_swap(redis_client):
    streams = Streams("hand2")
    with pytest.raises(HandoverError, match="refused to promote v1 \\(422\\)"):
        hand_over(_manifest(1), FakeServe(redis_client, streams, refuse=True), redis_client, streams, 5, poll_s=0.01)
    assert redis_client.get(streams.weights_latest) is None  # nothing announced
    slow = FakeServe(redis_client, streams, swaps=False)
    assert not hand_over(_manifest(1), slow, redis_client, streams, timeout_s=0.2, poll_s=0.01)


def test_hand_over_asks_no_promotion_when_callers_follow_the_candidate(redis_client):
    streams = Streams("hand3")
    serve = FakeServe(redis_client, streams)
    serve.state["promoted"] = 1  # serve.follow_candidate: callers get what the candidate swaps to
    assert hand_over(_manifest(1), serve, redis_client, streams, 5, follow_candidate=True, poll_s=0.01)
    assert serve.calls == []


class PromotedReplica(FakeServe):
    """`serve` with `ops.candidate_replica` (role "promoted"): moves on the promotion, never on the announcement; the
    version it gives the system's keys (its `candidate`) is its promoted one."""

    def versions(self) -> dict:
        return {"promoted": self.state["promoted"], "candidate": self.state["promoted"]}


class CandidateReplica(FakeServe):
    """`serve-candidate` (role "candidate"): swaps to the announced version after `lag` reads."""

    def __init__(self, redis_client, streams: Streams, lag: int) -> None:
        super().__init__(redis_client, streams)
        self.lag, self.reads = lag, 0

    def versions(self) -> dict:
        self.reads += 1
        return super().versions() if self.reads > self.lag else dict(self.state)


def test_hand_over_waits_for_both_replicas_with_a_candidate_replica(redis_client):
    streams = Streams("hand4")
    serve, candidate = PromotedReplica(redis_client, streams), CandidateReplica(redis_client, streams, lag=3)
    assert hand_over(_manifest(1), serve, redis_client, streams, 5, poll_s=0.01, candidate=candidate)
    assert serve.calls == ["promote v1 (before the announcement)"] and candidate.calls == []  # promoted on serve only
    assert candidate.reads == 4 and candidate.state["candidate"] == 1  # it waited until the candidate served v1 too
    stuck = CandidateReplica(redis_client, Streams("hand5"), lag=10**6)
    serve = PromotedReplica(redis_client, Streams("hand5"))
    assert not hand_over(_manifest(1), serve, redis_client, Streams("hand5"), 0.2, poll_s=0.01, candidate=stuck)


def test_the_progress_record_is_in_the_data_dir_and_in_redis(tmp_path, redis_client):
    now = [1000.0]
    board = ProgressBoard(tmp_path, redis_client, "prog", every_s=2.0, clock=lambda: now[0])
    board.update(phase="loading", budget_s=60.0, model_dir="/m")
    now[0] += 1
    board.step(3, 0.5, 0.25, 45.0)
    assert read_record(tmp_path).phase == "loading"  # a step is written at most every 2 s
    now[0] += 2
    board.step(4, 0.4, 0.3, 42.0)
    record = read_record(tmp_path)
    assert (record.phase, record.step, record.loss) == ("training", 4, 0.4)
    assert record.line(now[0]) == "training 30%, step 4, loss 0.400, 0:42 left"
    board.update(phase="served", version=2, served_at=now[0] + 60)
    from_redis = parse_record(redis_client.get(record_key("prog")))
    assert from_redis == json.loads((tmp_path / "warm-start.json").read_text())
    assert read_record(tmp_path).on_version and read_record(tmp_path).line() == "v2 served after 1:03"
