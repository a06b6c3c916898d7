"""The warm start beside serving in `slca up`'s plan (ops/run/supervisor/warm_stage.py): the `warmstart` process and
its thread share, the feed and the learner held for it, and what they start with once it has finished."""

from pathlib import Path

from ops.experiments.warmstart.progress import ProgressBoard
from ops.run.supervisor.plan import build_specs, split_threads
from ops.run.supervisor.up import warm_start_beside
from ops.run.supervisor.warm_stage import make_prepare, plan_beside
from slca.config import load_config

COMMANDS = {"serve", "worker", "assembler", "learn", "feed", "gate"}


def _config(tmp_path: Path, *more: str):
    return load_config(None, [f"common.cache_dir={tmp_path / 'cache'}", f"common.data_dir={tmp_path / 'var'}", *more])


def test_the_warm_start_takes_the_learners_thread_share_beside_serve():
    hf = load_config(None, ["serve.engine=hf"])
    assert split_threads(hf, cores=2, warm_start=True) == {"serve": 1, "learn": 1, "warmstart": 1}
    assert split_threads(hf, cores=8, warm_start=True) == {"serve": 4, "learn": 4, "warmstart": 4}
    vllm = load_config(None, ["serve.engine=vllm"])
    assert split_threads(vllm, cores=2, warm_start=True, gpu=False) == {
        "learn": 1,
        "warmstart": 2,
    }  # vLLM binds its own
    assert split_threads(vllm, cores=2, gpu=True) == {}
    assert split_threads(load_config(None, ['ops.process_threads={"serve": 1}']), cores=2, warm_start=True) == {
        "serve": 1
    }


TRAINED = ("warmstart", "learn")


def test_the_plan_runs_the_warm_start_first_and_holds_the_feed_the_learner_and_the_gate(tmp_path):
    config = _config(tmp_path, "serve.engine=hf", "ops.warm_start_minutes=2.5", "ops.warm_start_steps=7")
    assert warm_start_beside(config)
    (tmp_path / "var").mkdir()
    (tmp_path / "var" / "warm-start.json").write_text('{"phase": "served", "version": 4}')  # an earlier run's
    env = {"SLCA_REDIS_URL": "redis://x"}
    specs, _ = build_specs(config, ["--set", "a.b=1"], env, tmp_path / "logs", available=COMMANDS, warm_start=True)
    plan = {s.name: s for s in plan_beside(config, ["--set", "a.b=1"], env, tmp_path / "var", specs)}
    warm = plan["warmstart"]
    assert list(plan)[0] == "warmstart" and not warm.restart and warm.after == ()
    argv = warm.argv[warm.argv.index("sft") :]
    assert argv[:2] == ["sft", "--publish"] and ["--minutes", "2.5"] == argv[2:4] and ["--steps", "7"] == argv[4:6]
    assert argv[argv.index("--out") + 1] == str(tmp_path / "cache" / "models" / "SmolLM2-135M-Instruct-sft")
    assert "--set" in warm.argv and warm.env["SLCA_REDIS_URL"] == "redis://x" and warm.env["TQDM_DISABLE"] == "1"
    threads = split_threads(config, warm_start=True)
    assert warm.env["OMP_NUM_THREADS"] == str(threads["warmstart"])
    assert plan["serve"].env["OMP_NUM_THREADS"] == str(threads["serve"])
    assert all(plan[n].after == ("warmstart",) for n in ("learn", "feed", "gate"))
    assert {s.nice for s in plan.values()} == {0}  # `ops.training_nice` is off by default
    # on, training yields the cores to serving: the warm start and the learner nicer, nothing else
    config = _config(tmp_path, "serve.engine=hf", "ops.training_nice=7")
    specs, _ = build_specs(config, [], env, tmp_path / "logs", available=COMMANDS, warm_start=True)
    plan = {s.name: s for s in plan_beside(config, [], env, tmp_path / "var", specs)}
    assert plan["warmstart"].nice == plan["learn"].nice == 7 and {plan[n].nice for n in plan if n not in TRAINED} == {0}
    assert all(plan[n].after == () for n in ("serve", "worker", "assembler"))
    assert not (tmp_path / "var" / "warm-start.json").exists()  # this run's record only


def test_no_warm_start_beside_when_one_exists_is_off_or_the_model_is_chosen(tmp_path):
    assert not warm_start_beside(_config(tmp_path, "ops.warm_start_beside=false"))
    assert not warm_start_beside(_config(tmp_path, "common.model=tiny"))
    assert not warm_start_beside(_config(tmp_path, 'ops.processes=["worker"]'))
    warm = tmp_path / "cache" / "models" / "SmolLM2-135M-Instruct-sft"
    warm.mkdir(parents=True)
    (warm / "config.json").write_text("{}")
    assert not warm_start_beside(_config(tmp_path))  # a later run: as before


def test_held_processes_start_on_the_served_warm_start_and_the_feed_and_the_gate_judge_its_version(tmp_path):
    config = _config(tmp_path, "serve.engine=hf")
    specs, _ = build_specs(config, [], {}, tmp_path / "logs", available=COMMANDS, warm_start=True)
    plan = {s.name: s for s in plan_beside(config, [], {}, tmp_path / "var", specs)}
    prepare = make_prepare(tmp_path / "var")
    assert prepare(plan["feed"]).env == plan["feed"].env  # no record: the base model, as before
    board = ProgressBoard(tmp_path / "var")
    board.update(phase="failed", error="boom", model_dir="/m/warm")
    assert prepare(plan["learn"]).env == plan["learn"].env
    board.update(phase="served", version=3)
    feed, learn, serve = prepare(plan["feed"]), prepare(plan["learn"]), prepare(plan["serve"])
    assert feed.env["SLCA_MODEL"] == "/m/warm" and feed.env["SLCA_OPS__PROBE_BASELINE_VERSION"] == "3"
    gate = prepare(plan["gate"])  # the gate reads and keeps the warm start's records by its version and its model
    assert gate.env["SLCA_MODEL"] == "/m/warm" and gate.env["SLCA_OPS__PROBE_BASELINE_VERSION"] == "3"
    assert learn.env["SLCA_MODEL"] == "/m/warm" and "SLCA_OPS__PROBE_BASELINE_VERSION" not in learn.env
    assert serve is plan["serve"]  # serve keeps the base model: the warm start reached it as a swap
