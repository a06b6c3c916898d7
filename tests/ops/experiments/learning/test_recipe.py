"""The recipe sweep's bookkeeping: arms rotate over blocks, the report pairs each arm with its own block's warm
start item by item, finds a real gain and refuses to call a flat arm a winner, and writes its files by code."""

import json
import random
from pathlib import Path

import pytest

from ops.experiments.eval.suite import ItemRecord, write_jsonl
from ops.experiments.learning.files import write_json
from ops.experiments.learning.recipe_arms import RECIPE_ARMS, resolve, rotated
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


def _block(out: Path, b: int, warm: dict, arms: dict[str, dict]) -> None:
    d = out / "blocks" / f"b{b}"
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
