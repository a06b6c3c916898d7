"""`slca status` lists every serve replica from Redis: one line each with its id, served version, heartbeat age and
last swap, `STALE` on one that missed three heartbeats; one whose status expired is not listed."""

from __future__ import annotations

from types import SimpleNamespace

from ops.run.status import run_status
from slca.config import load_config
from slca.contracts import Streams
from tests.slca.test_replicas import PREFIX, status, write


def test_status_prints_one_line_per_replica_and_marks_the_stale_one(redis_url, redis_client, tmp_path, capsys):
    write(
        redis_url,
        status("serve-a:8000", 12, last_swap="ok", last_swap_version=12, last_swap_at=1.0),
        status("serve-b:8000", 11, last_swap="failed", last_swap_version=12, last_error="v12: checksum mismatch"),
        status("serve-c:8000", 9),
    )
    streams = Streams(PREFIX)
    redis_client.pexpire(streams.replica("serve-b:8000"), 30_000)  # last written 30 s ago: 3 heartbeats missed
    redis_client.delete(streams.replica("serve-c:8000"))  # expired
    config = load_config(
        None, [f"common.redis_url={redis_url}", f"common.data_dir={tmp_path}", f"common.stream_prefix={PREFIX}"]
    )
    assert run_status(SimpleNamespace(window=50), config) == 0
    out = capsys.readouterr().out
    lines = out[out.index("serve replicas (2):") :].splitlines()[1:3]
    a, b = lines
    assert a.split()[:2] == ["serve-a:8000", "v12"] and "STALE" not in a and "last swap ok (v12)" in a
    assert "http://serve-a:8000" in a
    assert b.split()[:2] == ["serve-b:8000", "v11"] and "STALE" in b
    assert "last swap failed (v12): v12: checksum mismatch" in b
    assert float(b.split("heartbeat")[1].split("s ago")[0]) >= 29
    assert "serve-c" not in out


def test_status_without_replicas_says_so(redis_url, tmp_path, capsys):
    config = load_config(None, [f"common.redis_url={redis_url}", f"common.data_dir={tmp_path}"])
    assert run_status(SimpleNamespace(window=50), config) == 0
    assert "serve replicas: none announced" in capsys.readouterr().out


def test_each_replica_of_one_role_is_named_with_its_role():
    from ops.run.replica_lines import replica_lines
    from slca.contracts.replicas import ReplicaView

    views = [
        ReplicaView(status("host:8000", 3, role="promoted"), 1.0),
        ReplicaView(status("host:8001", 5, role="candidate"), 1.0),
        ReplicaView(status("other:8000", 5), 1.0),
    ]
    lines = replica_lines(views).splitlines()[1:]
    assert [line.split()[:3] for line in lines] == [
        ["host:8000", "[promoted]", "v3"],
        ["host:8001", "[candidate]", "v5"],
        ["other:8000", "v5", "heartbeat"],  # both roles: the line as before
    ]
