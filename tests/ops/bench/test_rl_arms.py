"""`slca bench rl --arms`: the ablations' names, the block orders, the gains against each parent, a resumed run of
blocks on fake sides, and the prompt tokens both sides record."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from ops.bench.rl.arms import ABLATIONS, block_orders, gain_lines, gains, parse_arms, slca_over_trl_arms, spread
from ops.bench.rl.report import GIB, SideResult
from ops.bench.rl.slca_side import SlcaSpec, learner_steps
from ops.bench.rl.trl_side import TrlCounts, TrlSpec


def result(name: str, trained_tokens: int, seconds: float = 600, **kw) -> SideResult:
    return SideResult(
        name=name,
        seconds=seconds,
        completions=80,
        completions_trained=64,
        updates=8,
        generated_tokens=8000,
        peak_rss_bytes=int(kw.pop("rss_gib", 4.0) * GIB),
        trained_tokens=trained_tokens,
        **kw,
    )


def test_parse_arms_keeps_both_parents_first_and_refuses_unknown_or_idle_ablations():
    assert parse_arms(None, "hf") == ["trl", "slca"]
    assert parse_arms("trl-spg4, slca-share-prefix-off", "hf") == ["trl", "slca", "trl-spg4", "slca-share-prefix-off"]
    assert parse_arms("all", "vllm-colocate") == ["trl", "slca", *ABLATIONS]
    with pytest.raises(ValueError, match="known ablations"):
        parse_arms("trl-fast", "hf")
    with pytest.raises(ValueError, match="only with its vLLM generation"):
        parse_arms("trl-is-off", "hf")  # TRL applies the correction with vLLM only: the arm would be its parent


def test_block_orders_reverse_every_other_block_or_shuffle_by_seed():
    arms = ["trl", "slca", "trl-spg4"]
    assert block_orders(arms, 3) == [arms, arms[::-1], arms]
    drawn = block_orders(arms, 4, "random", seed=7)
    assert drawn == block_orders(arms, 4, "random", seed=7) and all(sorted(b) == sorted(arms) for b in drawn)
    with pytest.raises(ValueError):
        block_orders(arms, 3, "sorted")


def fake_blocks() -> dict:
    """Three blocks: slca 3000 tokens a window, without share_prefix 1000–1500; TRL 1000, TRL without IS 1100–1300."""
    r = {}
    for i, (off, no_is) in enumerate([(1000, 1100), (1500, 1300), (1200, 1200)]):
        r[i, "trl"] = result("trl", 1000, prompt_tokens_trained=8000, model_tokens_trained=9000)
        r[i, "slca"] = result("slca", 3000, prompt_tokens_trained=3000, model_tokens_trained=6000)
        r[i, "slca-share-prefix-off"] = result("slca-share-prefix-off", off, model_tokens_trained=5 * off, rss_gib=5)
        r[i, "trl-is-off"] = result("trl-is-off", no_is)
    return r


def test_gains_say_what_each_optimisation_buys_with_its_spread_over_blocks():
    arms = ["trl", "slca", "slca-share-prefix-off", "trl-is-off"]
    g = gains(fake_blocks(), arms, 3)
    prefix = g["slca-share-prefix-off"]
    assert prefix["gain_is"] == "parent ÷ ablation" and prefix["gain"] == pytest.approx([3.0, 2.0, 2.5])
    assert prefix["gain_spread"]["median"] == pytest.approx(2.5) and prefix["gain_spread"]["min"] == pytest.approx(2.0)
    assert prefix["tokens_run_per_trained_token"]["slca"] == [2.0, 2.0, 2.0]
    assert prefix["tokens_run_per_trained_token"]["slca-share-prefix-off"] == [5.0, 5.0, 5.0]
    assert prefix["peak_rss_gib"]["slca-share-prefix-off"] == [5.0, 5.0, 5.0]
    no_is = g["trl-is-off"]
    assert no_is["gain_is"] == "ablation ÷ parent" and no_is["gain"] == pytest.approx([1.1, 1.3, 1.2])
    versus = slca_over_trl_arms(fake_blocks(), arms, 3)
    assert versus["trl-is-off"]["spread"]["min"] == pytest.approx(3000 / 1300)
    lines = gain_lines(g, versus, 3)
    assert any("slca-share-prefix-off (parent ÷ ablation) = 2.50× (min–max 2.00–3.00; 75% interval" in x for x in lines)
    assert any("slca ÷ trl-is-off = 2.50×" in x for x in lines)


def test_spread_ignores_missing_ratios_and_is_none_without_any():
    assert spread([None, None]) is None
    assert spread([2.0, None, 4.0, 3.0])["median"] == 3.0


def test_blocks_run_every_arm_once_per_block_resume_and_report_the_parents_headline(tmp_path):
    from ops.bench.rl.blocks import run_blocks

    calls: list[str] = []
    rates = {"trl": 1000, "slca": 3000, "slca-share-prefix-off": 1500, "trl-spg4": 1200}

    def runner(side: str, stop_after: int | None):
        def run(spec, where):
            calls.append(where.name)
            if stop_after is not None and len(calls) > stop_after:
                raise KeyboardInterrupt
            arm = where.name.split("-", 1)[1]
            if side == "trl":
                assert spec.steps_per_generation == (4 if arm == "trl-spg4" else 1)
            else:
                assert ("learner.share_prefix=false" in spec.extra_sets) == (arm == "slca-share-prefix-off")
            return result(side, rates[arm], prompt_tokens_trained=100)

        return run

    args = SimpleNamespace(out=tmp_path / "out", pairs=3, order="alternate", seed=0)
    common = {
        "model": "m",
        "pack": "p",
        "group_size": 8,
        "max_new_tokens": 64,
        "minutes_per_window": 10,
        "precision": "bfloat16",
        "lr": 1e-5,
        "pipeline_sets": [],
    }
    arms = ["trl", "slca", "slca-share-prefix-off", "trl-spg4"]
    trl_spec = TrlSpec("m", "p", 8, 64, 600.0, lr=1e-5, bf16=True)

    def slca_spec(trl):
        return SlcaSpec("m", "p", 8, 64, 600.0 if trl is None else trl.seconds)

    with pytest.raises(KeyboardInterrupt):
        run_blocks(args, arms, trl_spec, slca_spec, tmp_path, common, runner("trl", 5), runner("slca", 5))
    assert calls == [f"block1-{a}" for a in arms] + ["block2-trl-spg4", "block2-slca-share-prefix-off"]  # 6th dies
    calls.clear()
    lines, data = run_blocks(
        args, arms, trl_spec, slca_spec, tmp_path, common, runner("trl", None), runner("slca", None)
    )
    assert calls == [f"block2-{a}" for a in arms[::-1][1:]] + [f"block3-{a}" for a in arms]  # the rest read back
    assert data["ab"]["ratio_b_over_a"] == [3.0, 3.0, 3.0] and data["ab"]["orders"] == [
        ["A", "B"],
        ["B", "A"],
        ["A", "B"],
    ]
    assert data["ablations"]["slca-share-prefix-off"]["gain_spread"]["median"] == pytest.approx(2.0)
    assert data["ablations"]["trl-spg4"]["gain_spread"]["median"] == pytest.approx(1.2)
    assert data["blocks"][1]["order"] == arms[::-1] and data["blocks"][0]["trl-spg4"]["prompt_tokens_trained"] == 100
    assert data["arms"]["trl-spg4"]["trl"] == {"steps_per_generation": 4}
    assert any("median over pairs = 3.00" in x and "target ≥ 2.0: met" in x for x in lines)
    assert any("trl-spg4 (ablation ÷ parent) = 1.20×" in x for x in lines)
    json.dumps(data)
    with pytest.raises(Exception, match="other settings"):
        run_blocks(args, arms[:3], trl_spec, slca_spec, tmp_path, common, runner("trl", None), runner("slca", None))


def test_both_sides_record_prompt_tokens_and_all_tokens_their_forward_passes_ran(tmp_path):
    from ops.bench.rl.main import trl_side_result

    c = TrlCounts(seconds=600, steps=4, updates=4, trained_tokens=1000, prompt_tokens=9000, prompt_tokens_trained=8000)
    r = trl_side_result(c, GIB, {}, name="trl-spg4")
    assert (r.name, r.prompt_tokens, r.prompt_tokens_trained, r.model_tokens_trained) == ("trl-spg4", 9000, 8000, 9000)
    assert r.to_dict()["model_tokens_trained_per_s"] == pytest.approx(15.0)
    path = tmp_path / "metrics.jsonl"
    rows = [
        # the learner's own counts (learner/step_stats.py): a step that trained one group, then one that trained none
        {"ts": 15.0, "groups_trained": 1, "trajectories_trained": 8, "tokens": 100, "tokens_trained": 100}
        | {"tokens_per_s": 90.0, "step_s": 2.0},
        {"ts": 16.0, "groups_trained": 0, "skipped_zero": 1, "tokens": 80, "tokens_per_s": 0.0, "step_s": 1.0},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    steps = learner_steps(path, 10.0, 20.0)
    assert (steps.model_tokens, steps.prompt_tokens, steps.updates) == (180, 80, 1)
