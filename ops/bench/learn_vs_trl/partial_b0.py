"""Block 0's figures with TRL's only checkpoint: its arm was OOM-killed 42 minutes in (the kernel's log: 23.8 GiB
resident, a 24 GiB machine), after its 30-minute save, so `slca bench learn-vs-trl --report` has no TRL arm for
block 0. Its 30-minute model was judged afterwards exactly as the block judges one (`recipe.evaluate`, greedy,
vLLM, 256 tokens a turn; `arms/trl/killed-items-30.jsonl`); this pairs it with slca's checkpoints and the warm
start. Writes `bench/learning/vs-trl/partial-b0.json`. Run from the repository root:

    python -m ops.bench.learn_vs_trl.partial_b0
"""

from __future__ import annotations

import json
from pathlib import Path

from ops.bench.learn_vs_trl.report import read_blocks
from ops.experiments.eval.suite import read_jsonl
from ops.experiments.learning.recipe_pairs import paired
from ops.experiments.learning.recipe_report import outcomes

HERE = Path("bench/learning/vs-trl")
PAIRS = [
    ("slca@30", None),
    ("slca@60", None),
    ("trl@30", None),
    ("slca@30", "trl@30"),
    ("slca@60", "trl@30"),
]


def main() -> None:
    (block,) = [b for b in read_blocks(HERE) if b["meta"]["block"] == 0]
    killed = read_jsonl(HERE / "blocks/b0/arms/trl/killed-items-30.jsonl")
    block["arms"]["trl@30"] = {"outcomes": outcomes(killed)}
    out = {
        "note": __doc__.split("\n\n")[0].replace("\n", " "),
        "comparisons": {
            suite: {f"{a} − {b or 'warm start'}": paired([block], a, b, suite) for a, b in PAIRS}
            for suite in ("train_probe", "test")
        },
    }
    (HERE / "partial-b0.json").write_text(json.dumps(out, indent=1) + "\n")
    for suite, rows in out["comparisons"].items():
        for name, c in rows.items():
            lo, hi = c["ci95"]
            print(
                f"{suite:12} {name:24} {c['a']:.3f} vs {c['b']:.3f}: {c['diff'] * 100:+.1f} pts "
                f"[{lo * 100:+.1f}, {hi * 100:+.1f}] +{c['gained']}/−{c['lost']}"
            )


if __name__ == "__main__":
    main()
