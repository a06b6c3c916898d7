"""`slca up` keeps secrets out of children's argv, out of logs and state files, and its logs owner-only."""

import argparse
import json
import stat
import sys

from ops.run.supervisor.process import Backoff, ManagedProcess, ProcessSpec, redact_argv
from ops.run.supervisor.up import global_argv, secret_env

CHILD = "from slca.config import load_config; print('token-ok', load_config().common.admin_token[::-1])"


def test_secret_overrides_reach_the_child_through_its_environment_only(tmp_path):
    args = argparse.Namespace(config=None, set=["serve.port=8123", "common.admin_token=tok-SECRET"])
    argv = global_argv(args)
    assert argv == ["--set", "serve.port=8123"]
    env = secret_env(args)
    assert "tok-SECRET" in env["SLCA_SET"]
    log = tmp_path / "logs" / "child.log"
    proc = ManagedProcess(ProcessSpec("child", [sys.executable, "-c", CHILD, *argv], log, env), Backoff())
    proc.start()
    assert proc.proc.wait(timeout=60) == 0
    assert proc.pump.join(5.0)  # the log pump has written all the child printed
    text = log.read_text()
    assert "token-ok TERCES-kot" in text and "tok-SECRET" not in text  # the child has it; the log never shows it
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert stat.S_IMODE(log.parent.stat().st_mode) == 0o700


def test_existing_world_readable_log_becomes_owner_only(tmp_path):
    log = tmp_path / "logs" / "old.log"
    log.parent.mkdir(mode=0o755)
    log.write_text("earlier run\n")
    log.chmod(0o644)
    proc = ManagedProcess(ProcessSpec("old", [sys.executable, "-c", "pass"], log), Backoff())
    proc.start()
    proc.proc.wait(timeout=60)
    assert stat.S_IMODE(log.stat().st_mode) == 0o600 and stat.S_IMODE(log.parent.stat().st_mode) == 0o700
    assert log.read_text().startswith("earlier run")


def test_logged_argv_is_redacted():
    argv = [
        "python",
        "-m",
        "slca",
        "--set",
        "common.record_key=rk-SECRET",
        "--set",
        "serve.port=1",
        "--set",
        "common.redis_url=redis://:pw-SECRET@h:1/0",
        "serve",
    ]
    shown = " ".join(redact_argv(argv))
    assert "SECRET" not in shown
    assert "common.record_key=***" in shown and "serve.port=1" in shown and "redis://:***@h:1/0" in shown


def test_inherited_secret_overrides_are_kept(monkeypatch):
    monkeypatch.setenv("SLCA_SET", json.dumps(["common.record_key=outer"]))
    env = secret_env(argparse.Namespace(config=None, set=["common.admin_token=inner"]))
    assert json.loads(env["SLCA_SET"]) == ["common.record_key=outer", "common.admin_token=inner"]


def test_slca_up_generates_the_weights_key_for_learner_and_serve(tmp_path):
    from ops.run.supervisor.up import child_env
    from slca.config import load_config

    env, _ = child_env(load_config(overrides=[f"common.cache_dir={tmp_path}"]), "redis://h:1/0", tmp_path)
    key = env["SLCA_WEIGHTS__KEY"]
    assert len(key) >= 32 and (tmp_path / "weights-key").read_text().strip() == key
    assert stat.S_IMODE((tmp_path / "weights-key").stat().st_mode) == 0o600
    env, _ = child_env(
        load_config(overrides=[f"common.cache_dir={tmp_path}", "weights.key=mine"]), "redis://h:1/0", tmp_path
    )
    assert "SLCA_WEIGHTS__KEY" not in env  # a configured key is used as it is (the children read the same config)


def test_a_restart_on_the_same_data_dir_keeps_the_weights_key_and_serve_loads_the_stored_version(
    tmp_path, tiny_model_dir
):
    """`make run` stopped at v28 and started again on its var/: serve refused the stored announcement ("bad
    signature": the key was new each run) and served v0 while the learner resumed at v28. The key now outlives a run."""
    import asyncio

    from prometheus_client import CollectorRegistry

    from ops.run.supervisor.up import child_env
    from serve.metrics import ServeMetrics
    from slca.config import load_config
    from slca.contracts import Streams
    from slca.weights import DiskTransport, ManifestPolicy, WeightSwapper
    from tests.support.weights import publish_version

    config = load_config(overrides=[f"common.cache_dir={tmp_path}"])
    data = tmp_path / "var"
    data.mkdir()
    first = child_env(config, "redis://h:1/0", data)[0]["SLCA_WEIGHTS__KEY"]
    v3 = publish_version(tiny_model_dir, data / "weights", 3, 1.01, key=first)  # what the learner left, signed
    (data / "weights-key").chmod(0o644)  # someone loosened it in between: made owner-only again
    again = child_env(config, "redis://h:1/0", data)[0]["SLCA_WEIGHTS__KEY"]  # `slca up` on the same data dir
    assert again == first and stat.S_IMODE((data / "weights-key").stat().st_mode) == 0o600

    class Engine:
        version = 0

        async def swap_weights(self, weights) -> float:
            weights.check()  # the files against the announced manifest
            self.version = weights.version
            return 0.01

    class Latest:  # slca:weights:latest holds the stored announcement; the channel is quiet
        async def get(self, key):
            return v3.model_dump_json()

        def pubsub(self):
            raise ConnectionError("quiet")

    async def restarted_serve() -> int:
        engine = Engine()
        swapper = WeightSwapper(
            engine,
            ServeMetrics(CollectorRegistry()),
            retry_s=60,
            policy=ManifestPolicy(again),
            transport=DiskTransport(),
        )
        follow = asyncio.create_task(swapper.follow(Latest(), Streams("slca")))
        for _ in range(500):
            if engine.version:
                break
            await asyncio.sleep(0.01)
        follow.cancel()
        return engine.version

    assert asyncio.run(restarted_serve()) == 3
