"""`ops.candidate_replica` in `slca up`'s plan (ops/run/supervisor/plan.py): `serve` becomes the promoted replica and
`serve-candidate` runs beside it — same command, environment and supervision, role "candidate", its own port, log,
readiness probe and identity — and the feed, the probe, the gate and the warm start are pointed at the right one.
Off (the default), or with `serve.follow_candidate`, the plan is unchanged. The plan only: no process starts."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from ops.run.supervisor.plan import build_specs
from ops.run.supervisor.warm_stage import plan_beside
from slca.config import load_config

COMMANDS = {"serve", "worker", "assembler", "learn", "feed", "gate"}
ENV = {"SLCA_REDIS_URL": "redis://x"}
ARGV = ["--set", "serve.port=8100"]  # the user's own --set, forwarded to every child


def _plan(*overrides: str, logs: Path = Path("/nonexistent/logs")):
    config = load_config(None, ["serve.port=8100", *overrides])
    specs, _ = build_specs(config, ARGV, dict(ENV), logs, COMMANDS)
    return config, {s.name: s for s in specs}


def _sets(argv: list[str]) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == "--set"]


def test_off_the_plan_is_unchanged():
    _, default = _plan()
    for off in (["ops.candidate_replica=false"], ["ops.candidate_replica=true", "serve.follow_candidate=true"]):
        _, plan = _plan(*off)
        assert list(plan) == list(default) == ["serve", "worker", "assembler", "learn", "feed", "gate"]
        assert plan == default and plan["serve"].argv[-2:] == ["serve.port=8100", "serve"]


def test_on_serve_is_the_promoted_replica_and_serve_candidate_runs_beside_it():
    _, default = _plan()
    _, plan = _plan("ops.candidate_replica=true", logs=Path("/var/slca/logs"))
    assert list(plan) == ["serve", "serve-candidate", "worker", "assembler", "learn", "feed", "gate"]
    serve, candidate = plan["serve"], plan["serve-candidate"]
    assert serve.argv == [*default["serve"].argv[:-1], "--set", "serve.role=promoted", "serve"]
    assert (serve.url, serve.ready_url) == ("http://127.0.0.1:8100", "http://127.0.0.1:8100/readyz")  # callers'
    assert candidate.argv[-1] == "serve" and _sets(candidate.argv) == [
        "serve.port=8100",  # the user's, then the replica's own: the later --set wins
        "serve.role=candidate",
        "serve.port=8101",
    ]
    assert (candidate.url, candidate.ready_url) == ("http://127.0.0.1:8101", "http://127.0.0.1:8101/readyz")
    assert candidate.log_path == Path("/var/slca/logs/serve-candidate.log")
    assert candidate.env == serve.env and candidate.stop_group and candidate.restart and candidate.after == ()
    assert all((plan[n].argv, plan[n].env) == (default[n].argv, default[n].env) for n in list(plan)[2:])


def test_the_candidate_replica_gets_its_own_port_id_and_address_where_they_are_configured():
    _, plan = _plan(
        "ops.candidate_replica=true",
        "ops.candidate_replica_port=9000",
        "serve.host=10.0.0.5",
        "serve.replica_id=box-1",
        "serve.advertise_url=http://box-1.internal:8100",
    )
    assert _sets(plan["serve-candidate"].argv)[1:] == [
        "serve.role=candidate",
        "serve.port=9000",
        "serve.replica_id=box-1-candidate",
        "serve.advertise_url=http://box-1.internal:9000",
    ]
    assert plan["serve-candidate"].url == "http://10.0.0.5:9000" and plan["serve"].url == "http://10.0.0.5:8100"


def test_the_feed_the_gate_and_the_warm_start_are_pointed_at_their_replica(tmp_path):
    from ops.run.feed.main import make_plan
    from ops.run.gate.cli import _candidate_url, _url

    args = SimpleNamespace(url=None, concurrency=None, requests=None, candidate_url=None)
    for on, feed, candidate in ((True, "http://127.0.0.1:8101", "http://127.0.0.1:8101"),
                                (False, "http://127.0.0.1:8100", None)):  # fmt: skip
        config = load_config(
            None,
            ["serve.port=8100", f"ops.candidate_replica={str(on).lower()}", f"common.data_dir={tmp_path / 'var'}"],
        )
        assert make_plan(args, config).url == feed  # the feed, and its probe (the same URL)
        assert (_url(args, config), _candidate_url(args, config)) == ("http://127.0.0.1:8100", candidate)
        specs, _ = build_specs(config, [], dict(ENV), tmp_path / "logs", COMMANDS, warm_start=True)
        warm = plan_beside(config, [], dict(ENV), tmp_path / "var", specs)[0]
        argv = warm.argv[warm.argv.index("sft") :]
        assert argv[argv.index("--serve-url") + 1] == "http://127.0.0.1:8100"  # promotes on serve
        assert ("--candidate-url" in argv) == on and (not on or argv[argv.index("--candidate-url") + 1] == candidate)


def test_the_process_table_keeps_its_columns_with_the_longer_name():
    from ops.run.supervisor.table import process_table

    rows = [
        {"name": n, "pid": 1, "state": "running", "restarts": 0, "uptime_s": 1} for n in ("serve", "serve-candidate")
    ]
    lines = process_table(rows).splitlines()
    assert len({line.index("running") for line in lines[1:]}) == 1 and lines[0].index("STATE") == lines[1].index(
        "running"
    )


def test_with_the_hf_engine_the_two_serve_processes_split_serves_thread_share():
    from ops.run.supervisor.plan import split_threads

    hf = ["serve.engine=hf", "ops.candidate_replica=true"]
    # serve-candidate (the feed's, the probe's) takes the larger half of serve's share; the learner keeps its own
    assert split_threads(load_config(None, hf), cores=8) == {"serve": 2, "serve-candidate": 2, "learn": 4}
    assert split_threads(load_config(None, hf), cores=6) == {"serve": 1, "serve-candidate": 2, "learn": 3}
    assert split_threads(load_config(None, hf), cores=2) == {"serve": 1, "serve-candidate": 1, "learn": 1}
    assert split_threads(load_config(None, [*hf, "serve.follow_candidate=true"]), cores=8) == {"serve": 4, "learn": 4}
    assert split_threads(load_config(None, hf), cores=2, warm_start=True)["warmstart"] == 1
    config, plan = _plan(*hf)
    threads = split_threads(config)
    assert plan["serve"].env["OMP_NUM_THREADS"] == str(threads["serve"])
    assert plan["serve-candidate"].env["OMP_NUM_THREADS"] == str(threads["serve-candidate"])
    assert plan["learn"].env["OMP_NUM_THREADS"] == str(threads["learn"])
    # counts the user set: serve-candidate's own where named, else serve's
    _, plan = _plan(*hf, 'ops.process_threads={"serve": 2, "serve-candidate": 3}')
    assert (plan["serve"].env["OMP_NUM_THREADS"], plan["serve-candidate"].env["OMP_NUM_THREADS"]) == ("2", "3")
    _, plan = _plan(*hf, 'ops.process_threads={"serve": 2}')
    assert plan["serve-candidate"].env["OMP_NUM_THREADS"] == "2"
