"""`slca bench online` on a Redis holding a run (the one `slca status` is tested on): the curve files, the probe's
v0 and latest per-item files and their paired summary."""

import json
from types import SimpleNamespace

from ops.observe.online import run_online_export
from tests.ops.run.test_status import run_in_redis


def test_bench_online_writes_curve_files_and_paired_summary(redis_url, tmp_path, capsys):
    config, entries = run_in_redis(redis_url, tmp_path)
    out = tmp_path / "bench"
    assert run_online_export(SimpleNamespace(out=out, command="make run", note=""), config) == 0
    assert "probe_summary.json, probe/" in capsys.readouterr().out
    summary = json.loads((out / "probe_summary.json").read_text())
    assert summary["source"] == "per-item files" and summary["paired"]["held_out"]["diff"] > 0.3
    assert sorted(p.name for p in (out / "probe").iterdir()) == ["v0.jsonl", "v60.jsonl"]
    assert {"results.json", "results.md", "curve.png"} <= {p.name for p in out.iterdir()}


def test_bench_online_copies_the_learner_metrics_and_judges_the_last_served_version(
    redis_url, tmp_path, capsys, monkeypatch
):
    """The run's rounds end at v60–v61 (spanning a swap): v61, the last served version, is judged pinned on its
    published weights; the learner's per-step file is copied beside the results."""
    import ops.experiments.eval.main as eval_main
    from ops.experiments.eval.suite import read_jsonl

    config, entries = run_in_redis(redis_url, tmp_path)
    data_dir = tmp_path / "var"
    (data_dir / "learner").mkdir(parents=True)
    (data_dir / "learner" / "metrics.jsonl").write_text('{"step": 1, "loss": 0.5}\n{"step": 2, "loss": 0.4}\n')
    (data_dir / "weights" / "v61").mkdir(parents=True)
    v0 = read_jsonl(data_dir / entries[0]["records"])
    asked = []

    def pinned(config, model_dir, plan, engine, items):
        asked.append(model_dir.name)
        return SimpleNamespace(records=[r.__class__(**{**r.__dict__, "success": True}) for r in v0])

    monkeypatch.setattr(eval_main, "evaluate_model", pinned)
    out = tmp_path / "bench"
    assert run_online_export(SimpleNamespace(out=out, command="make run", note=""), config) == 0
    assert asked == ["v61"] and "learner_metrics.jsonl" in capsys.readouterr().out
    assert (out / "learner_metrics.jsonl").read_text().count("\n") == 2
    results = json.loads((out / "results.json").read_text())
    assert results["learner_metrics"] == "learner_metrics.jsonl" and results["probe"][-1]["pinned"] is True
    assert results["verdict"].endswith("; judged v61 (final round, pinned, the last served version)")
    assert sorted(p.name for p in (out / "probe").iterdir()) == ["v0.jsonl", "v61-final.jsonl"]


def test_after_the_run_stopped_its_streams_are_read_from_a_copy_of_the_owned_redis_aof(tmp_path, capsys):
    """`make run`, Ctrl-C, `slca bench online`: the owned Redis stopped with the run (a connection refused, before),
    so the export reads a copy of its append-only file, and leaves the run's own files as they were."""
    import redis

    from ops.observe.online import run_redis
    from slca.redis_server import RedisServer, free_port

    owned = RedisServer(tmp_path / "redis", appendonly=True, appendfsync="always", password="pw").start()
    client = redis.Redis.from_url(owned.url)
    client.xadd("slca:stats:probe", {"round": "1"})
    client.close()
    url = owned.url
    with run_redis(url, tmp_path) as same:  # running: read where it is
        assert same == url
    owned.stop()
    before = sorted((p.name, p.stat().st_size) for p in (tmp_path / "redis" / "appendonlydir").iterdir())
    with run_redis(url, tmp_path) as copy:
        assert copy != url
        reader = redis.Redis.from_url(copy)
        assert [fields for _, fields in reader.xrange("slca:stats:probe")] == [{b"round": b"1"}]
        reader.close()
    assert "reading a copy of its append-only file" in capsys.readouterr().out
    assert sorted((p.name, p.stat().st_size) for p in (tmp_path / "redis" / "appendonlydir").iterdir()) == before
    with run_redis(f"redis://127.0.0.1:{free_port()}/0", tmp_path / "nothing") as none:  # no file: as before
        assert none.startswith("redis://127.0.0.1:")
