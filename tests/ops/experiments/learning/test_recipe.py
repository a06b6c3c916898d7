"""The recipe sweep's bookkeeping: arms rotate over blocks, the report pairs each arm with its own block's warm
start item by item, finds a real gain and refuses to call a flat arm a winner, and writes its files by code."""

import json
import random
from pathlib import Path

import pytest

from ops.experiments.eval.suite import ItemRecord, write_jsonl
from ops.experiments.learning.files import write_json
from ops.experiments.learning.recipe_arms import ARM_SETS, RECIPE_ARMS, resolve, rotated
from ops.experiments.learning.recipe_report import paired, read_blocks, write_report
from slca.cli import CliError


def test_rotation_puts_every_arm_in_every_position():
    arms = resolve(None)
    orders = [[a.name for a in rotated(arms, b)] for b in range(len(arms))]
    for position in range(len(arms)):
        assert sorted(order[position] for order in orders) == sorted(RECIPE_ARMS)


def test_unknown_arm_is_a_cli_error():
    with pytest.raises(CliError, match="unknown recipe arm"):
        resolve("today,bogus")


def test_set_args_are_config_literals():
    args = RECIPE_ARMS["g4-lr3e-6"].set_args()
    assert "learner.advantage.decision_token=true" in args
    assert "learner.groups_per_step=4" in args


def _records(suite: str, outcomes: list[bool]) -> list[ItemRecord]:
    return [ItemRecord(suite, f"t{i}", ok, None, None) for i, ok in enumerate(outcomes)]


def _block(out: Path, b: int, warm: dict, arms: dict[str, dict], folder: str = "blocks") -> None:
    d = out / folder / f"b{b}"
    d.mkdir(parents=True)
    meta = {
        "block": b,
        "machine": {"cpu": "x", "cpu_flags": [], "load_average_1m": 0.1},
        "minutes": 1,
        "order": list(arms),
    }
    write_json(d / "block.json", meta)
    write_jsonl([r for s, o in warm.items() for r in _records(s, o)], d / "warm_start.items.jsonl")
    for name, suites in arms.items():
        a = d / "arms" / name
        a.mkdir(parents=True)
        write_jsonl([r for s, o in suites.items() for r in _records(s, o)], a / "items.jsonl")
        lines = [{"success_mean": 0.5, "generate_s": 1, "step_s": 1, "groups_in": 4, "groups_screened": 1}]
        (a / "train.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
        done = {"arm": name, "settings": {}, "steps": 1, "trajectories": 32, "train_seconds": 60.0}
        write_json(a / "done.json", done)


def test_report_pairs_within_blocks_and_names_a_real_winner(tmp_path):
    rng = random.Random(1)
    for b in range(2):
        warm_probe = [rng.random() < 0.5 for _ in range(64)]
        warm_test = [rng.random() < 0.5 for _ in range(100)]
        better = [True if not ok and i % 2 == 0 else ok for i, ok in enumerate(warm_probe)]  # +~25 points
        _block(
            tmp_path,
            b,
            {"train_probe": warm_probe, "test": warm_test},
            {
                "today": {"train_probe": warm_probe, "test": warm_test},
                "g4-lr3e-6": {"train_probe": better, "test": warm_test},
            },
        )
    blocks = read_blocks(tmp_path)
    flat = paired(blocks, "today", None, "train_probe")
    assert flat["diff"] == 0 and flat["ci95"] == [0, 0]
    gain = paired(blocks, "g4-lr3e-6", None, "train_probe")
    assert gain["diff"] > 0.15 and gain["ci95"][0] > 0 and gain["lost"] == 0
    results = write_report(tmp_path)
    assert results["verdict"].startswith("winner: g4-lr3e-6")
    assert (tmp_path / "results.md").read_text().startswith("**Verdict: winner: g4-lr3e-6")
    assert (tmp_path / "recipe.png").stat().st_size > 0


def test_no_winner_when_no_arm_moves(tmp_path):
    outcomes = [i % 3 == 0 for i in range(64)]
    _block(
        tmp_path,
        0,
        {"train_probe": outcomes, "test": outcomes},
        {"today": {"train_probe": outcomes, "test": outcomes}},
    )
    assert write_report(tmp_path)["verdict"].startswith("no winner")


def test_a_target_fixed_before_the_run_is_judged_first_and_cannot_move(tmp_path):
    from ops.experiments.learning.recipe import fix_target

    rng = random.Random(2)
    warm = [rng.random() < 0.5 for _ in range(64)]
    small = [True if not ok and i % 8 == 0 else ok for i, ok in enumerate(warm)]  # ≈ +6 points
    _block(tmp_path, 0, {"train_probe": warm, "test": warm}, {"g4-lr1e-5": {"train_probe": small, "test": warm}})
    fix_target(tmp_path, 10.0)
    results = write_report(tmp_path)
    assert results["target"]["verdict"].startswith("target ≥ +10 points")
    assert "g4-lr1e-5 missed" in results["target"]["verdict"]  # above 0 but below the 10 points fixed
    assert (tmp_path / "results.md").read_text().startswith("**Target: target ≥ +10 points")
    with pytest.raises(CliError, match="may not change it"):
        fix_target(tmp_path, 5.0)
    fix_target(tmp_path, 10.0)  # the same target again: a later block


# --- the estimator arms (issue 35 item 3) ------------------------------------------------------------------------


def test_estimator_arms_train_at_the_recipe_with_their_own_estimator_and_decision_token():
    from ops.experiments.learning.recipe_arms import ESTIMATORS, estimator_arms

    arms = estimator_arms("g4-lr3e-6")
    assert list(arms) == list(ESTIMATORS) == ["slca", "slca_decision", "grpo", "toolpo", "rltr"]
    assert [a.estimator for a in arms.values()] == ["slca", "slca", "grpo", "toolpo", "rltr"]
    for arm in arms.values():
        assert arm.settings["learner.groups_per_step"] == 4 and arm.settings["learner.lr"] == 3e-6
        assert arm.settings["learner.advantage.success_weight"] == 1.0
        assert arm.settings["learner.screen_success_variance"] is True
        decides = arm.settings["learner.advantage.decision_token"]
        assert decides is (arm.name == "slca_decision")
    assert estimator_arms("g8-lr3e-6")["grpo"].settings["learner.groups_per_step"] == 8
    with pytest.raises(CliError, match="unknown recipe"):
        estimator_arms("bogus")


def test_the_arm_set_is_a_flag_and_the_recipe_sweep_stays_the_default():
    from slca.cli import build_parser

    parser = build_parser()
    default = parser.parse_args(["bench", "recipe", "--block", "0"])
    assert (default.arm_set, default.recipe) == ("recipe", None)  # each arm set at its own recipe unless named
    assert ARM_SETS["estimators"].recipe == "g4-lr3e-6" and not ARM_SETS["recipe"].at_recipe
    chosen = parser.parse_args(["bench", "recipe", "--block", "2", "--arm-set", "estimators", "--recipe", "g4-lr1e-5"])
    assert (chosen.arm_set, chosen.recipe) == ("estimators", "g4-lr1e-5")
    with pytest.raises(SystemExit):
        parser.parse_args(["bench", "recipe", "--arm-set", "bogus"])


def test_an_estimator_block_runs_every_arm_once_rotated_in_blocks_of_its_own(tmp_path, monkeypatch, tiny_model_dir):
    from ops.experiments.learning import recipe
    from ops.experiments.warmstart import model as warm_model
    from slca.config import load_config

    monkeypatch.setattr(warm_model, "resolve_warm_start", lambda name, config: tiny_model_dir)
    ran = []

    def fake_warm(model_dir, items, args, block_dir, cache):
        write_jsonl(
            [ItemRecord(i.suite, i.item_id, False, 0.0, 0.0) for i in items], block_dir / "warm_start.items.jsonl"
        )
        return {"checksum": "c", "scorer": "s", "records": [], "eval_seconds": 1.0}

    monkeypatch.setattr(recipe, "warm_start_records", fake_warm)
    monkeypatch.setattr(recipe, "run_arm", lambda arm, args, model, block_dir, items, seed: ran.append((arm, seed)))
    argv = ["bench", "recipe", "--block", "2", "--arm-set", "estimators", "--trajectories", "64"]
    from slca.cli import build_parser

    args = build_parser().parse_args([*argv, "--out", str(tmp_path), "--probe-size", "8"])
    assert recipe.run_block(args, load_config(None, [f"common.cache_dir={tmp_path / 'cache'}"])) == 0
    assert [a.name for a, _ in ran] == ["grpo", "toolpo", "rltr", "slca", "slca_decision"]
    assert {seed for _, seed in ran} == {2}
    assert ran[0][0].settings["learner.lr"] == 3e-6 and ran[0][0].estimator == "grpo"
    block = json.loads((tmp_path / "estimator-blocks" / "b2" / "block.json").read_text())
    assert (block["arm_set"], block["recipe"]) == ("estimators", "g4-lr3e-6")
    assert not (tmp_path / "blocks").exists()
    # the same block again at another recipe would mix two recipes in one block
    args.recipe = "g4-lr1e-5"
    with pytest.raises(CliError, match="was run as arm set estimators"):
        recipe.run_block(args, load_config(None, [f"common.cache_dir={tmp_path / 'cache'}"]))


def test_the_estimator_comparison_pairs_with_slca_under_holm_and_the_margin(tmp_path):
    rng = random.Random(2)
    probe = [rng.random() < 0.5 for _ in range(64)]
    test = [rng.random() < 0.5 for _ in range(100)]
    worse = [False if ok and i % 2 == 0 else ok for i, ok in enumerate(probe)]  # −~25 points
    same = {"train_probe": probe, "test": test}
    _block(tmp_path, 0, same, {"today": same})  # the recipe sweep's block, untouched
    for b in range(2):
        arms = {"slca": same, "slca_decision": same, "grpo": {"train_probe": worse, "test": test}}
        _block(tmp_path, b, same, arms, folder="estimator-blocks")
    results = write_report(tmp_path)
    rows = {(r["arm"], r["suite"]): r for r in results["estimators"]["comparisons"]}
    assert len(rows) == 8 and rows["toolpo", "test"]["paired"] is None  # the family is named before any block
    grpo = rows["grpo", "train_probe"]
    assert grpo["verdict"] == "slca better" and grpo["p_holm"] < 0.05 and not grpo["non_inferior"]
    same_arm = rows["slca_decision", "test"]
    assert same_arm["verdict"] == "no difference detected" and same_arm["non_inferior"]
    assert rows["grpo", "test"]["non_inferior"] and rows["grpo", "test"]["p_holm"] == 1.0
    md = (tmp_path / "results.md").read_text()
    assert "## Estimator comparison" in md and "Holm" in md and "margin 5 points" in md
    assert "| toolpo | test | – |" in md and (tmp_path / "estimators.png").stat().st_size > 0
    assert results["arms"]["today"]["vs_warm"]["train_probe"]["diff"] == 0  # the sweep's report is unchanged


def test_holm_counts_a_missing_comparison_as_p_one():
    from ops.experiments.learning.recipe_estimators import FAMILY, holm_family

    one = {FAMILY[0]: 0.01}
    assert holm_family(one)[FAMILY[0]] == pytest.approx(0.01 * len(FAMILY))
