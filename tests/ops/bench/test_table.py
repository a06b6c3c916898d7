"""The README's performance table is made from the committed bench results and cannot drift from them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ops.bench.table import END, START, current_block, render, replace_block

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
    assert f"| rl | {what} | **2.00×** |" in block
