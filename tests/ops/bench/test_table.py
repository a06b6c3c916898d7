"""The README's performance table is made from the committed bench results and cannot drift from them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ops.bench.table import BEFORE_RECIPE, END, START, current_block, render, replace_block

ROOT = Path(__file__).resolve().parents[3]


def test_the_readme_table_is_what_the_committed_results_give():
    readme = (ROOT / "README.md").read_text()
    assert current_block(readme) == render(ROOT), "run `slca bench table --write` after a bench run"


def ab(median: float, low: float, high: float) -> dict:
    machine = {"load_average": [1.2, 1.0, 0.9], "cpu_flags": ["avx2", "amx_bf16"]}
    return {
        "pairs": 3,
        "median_ratio": median,
        "min_ratio": low,
        "max_ratio": high,
        "interval": [low, high],
        "interval_coverage": 0.75,
        "machine_start": machine,
        "machine_end": {**machine, "load_average": [2.5, 1.5, 1.0]},
    }


def test_rows_give_the_median_its_spread_pairs_and_load_and_say_what_is_missing(tmp_path):
    (tmp_path / "bench/sft/ab").mkdir(parents=True)
    (tmp_path / "bench/sft/ab/results.json").write_text(
        json.dumps({"command": "slca bench sft --pairs 3", "ab": ab(1.5, 1.25, 1.75)})
    )
    block = render(tmp_path)
    assert block.startswith(START) and block.endswith(END)
    assert "| sft | new warm-start loop ÷ old (real tokens/s) | **1.50×** | 1.25–1.75 | 1.25–1.75 (75%) | 3 |" in block
    assert "| 1.2 → 2.5 | avx2, amx_bf16 |" in block
    assert "| rl | not yet measured with the method (`bench/rl/ab-hf/results.json` missing)" in block
    assert "- sft: `slca bench sft --pairs 3` → `bench/sft/ab/`" in block


def test_the_block_is_replaced_between_its_markers_only():
    text = f"intro\n{START}\nold table\n{END}\nafter\n"
    assert replace_block(text, f"{START}\nnew\n{END}") == f"intro\n{START}\nnew\n{END}\nafter\n"
    with pytest.raises(ValueError, match="no block"):
        replace_block("no markers", "x")


def test_an_rl_row_names_the_pipeline_settings_beyond_its_engine(tmp_path):
    """Two rl results on one engine differ by their other `--pipeline-set`s; the row says which."""
    (tmp_path / "bench/rl/ab-hf-prefix-cache").mkdir(parents=True)
    (tmp_path / "bench/rl/ab-hf-prefix-cache/results.json").write_text(
        json.dumps(
            {
                "command": "slca bench rl --pipeline-set serve.engine=hf",
                "serve_engine": "hf",
                "trl_generation": "hf",
                "pipeline_sets": ["serve.engine=hf", "serve.hf_prefix_cache_tokens=8192"],
                "ab": ab(2.0, 1.5, 2.5),
            }
        )
    )
    block = render(tmp_path)
    what = "slca (hf engine, serve.hf_prefix_cache_tokens=8192) ÷ TRL GRPOTrainer (HF generate) (trained tokens/hour)"
    # measured before the learner's 2026-12-05 recipe: the row says so (the results file cannot)
    assert f"| rl | {what} ({BEFORE_RECIPE}) | **2.00×** |" in block


def write_results(root: Path, where: str, data: dict) -> None:
    (root / where).mkdir(parents=True)
    (root / where / "results.json").write_text(json.dumps(data))


def test_the_as_shipped_row_gives_slcas_summed_peak_beside_the_ratio(tmp_path):
    """One run for both targets: the row says it is slca as shipped and quotes its largest whole-system peak."""
    window = {"trl": {"peak_rss_gib": 20.0}}
    pairs = [{**window, "slca": {"peak_rss_gib": 5.5}}, {**window, "slca": {"peak_rss_gib": 5.9}}]
    write_results(
        tmp_path,
        "bench/rl/as-shipped",
        {
            "command": "slca bench rl --as-shipped",
            "serve_engine": "vllm",
            "trl_generation": "vllm-colocate",
            "pipeline_sets": [],
            "as_shipped": True,
            "ab": ab(2.1, 1.9, 2.4),
            "pairs": pairs,
        },
    )
    block = render(tmp_path)
    assert (
        "slca (vllm engine, as shipped) ÷ TRL GRPOTrainer (vLLM colocate) (trained tokens/hour); slca's peak" in block
    )
    assert "(all processes, summed) 5.90 GiB | **2.10×** |" in block


def test_ablation_rows_give_each_gain_with_its_spread_and_say_when_there_is_none(tmp_path):
    gain = {"median": 1.8, "min": 1.5, "max": 2.2, "interval": [1.5, 2.2], "interval_coverage": 0.75}
    ablations = {
        "slca-share-prefix-off": {
            "gain_is": "parent ÷ ablation",
            "change": "learner.share_prefix=false",
            "gain": [1.5, 1.8, 2.2],
            "gain_spread": gain,
        },
        "trl-spg4": {
            "gain_is": "ablation ÷ parent",
            "change": "steps_per_generation 4",
            "gain": [None],
            "gain_spread": None,
        },
    }
    write_results(
        tmp_path,
        "bench/rl/ablations-vllm",
        {
            "command": "slca bench rl --arms all",
            "serve_engine": "vllm",
            "trl_generation": "vllm-colocate",
            "pipeline_sets": [],
            "ab": ab(2.5, 2.0, 3.0),
            "ablations": ablations,
        },
    )
    block = render(tmp_path)
    assert "| rl | slca (vllm engine) ÷ TRL GRPOTrainer (vLLM colocate) (trained tokens/hour) | **2.50×** |" in block
    share = "ablation slca-share-prefix-off: gain of what it removes, parent ÷ ablation (trained tokens/hour)"
    assert (
        f"| rl-ablation | {share} — learner.share_prefix=false | **1.80×** | 1.50–2.20 | 1.50–2.20 (75%) | 3 |" in block
    )
    assert (
        "ablation trl-spg4: gain of what it removes, ablation ÷ parent (trained tokens/hour) — steps_per_gener" in block
    )
    assert "steps_per_generation 4 | — | — | — | 1 | — | — |" in block


def test_the_learning_row_quotes_the_verdict_and_counts_the_blocks_with_both_arms(tmp_path):
    write_results(
        tmp_path,
        "bench/learning/vs-trl",
        {
            "command": "slca bench learn-vs-trl --block N",
            "target": {
                "verdict": "not judged yet: 1 of 3 blocks",
                "reach": {"blocks": 1},
                "ends_higher": {"blocks": 1},
            },
            "blocks": [
                {"machine": {"cpu_flags": ["avx2", "avx512_bf16"]}, "arms": {"slca": {}, "trl": {}}},
                {"machine": {"cpu_flags": ["avx2", "avx512_bf16"]}, "arms": {"slca": {}}},
            ],
        },
    )
    block = render(tmp_path)
    row = "| learning | slca vs TRL GRPOTrainer, same minutes: not judged yet: 1 of 3 blocks | — | — | — | 1 | — |"
    assert f"{row} avx2, avx512_bf16 |" in block
    assert "- learning: `slca bench learn-vs-trl --block N` → `bench/learning/vs-trl/`" in block
