"""TRL's model saved at marks on a wall clock (`slca bench learn-vs-trl`, issue 40 item 1): the model as it is at
minute m of the arm, judged later like any published version.

The clock is the parent's (`TrlSpec.clock_start`: when it launched this process), so TRL's start-up — imports,
loading the model, vLLM's engine — counts as the other side's does. TRL's `Trainer` can act only at a step end, and
keeps no earlier weights to look back to: mark m is saved at the first step end at or after m (at most one TRL step
late; each checkpoint records its elapsed seconds). Several marks past in one step get the same weights. After the
last mark training stops.

A checkpoint is written as the learner writes a version (`slca.weights.publish.write_version`: safetensors and
config from the model, the tokenizer files and chat template from the warm start, a manifest, in a temporary
directory renamed when complete), so the evaluation loads both sides' checkpoints the same way.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path


def due_marks(marks: Sequence[float], saved: int, elapsed_s: float) -> list[float]:
    """The marks (minutes, ascending) that `elapsed_s` has reached among those not saved yet (all but the first
    `saved`)."""
    return [m for m in marks[saved:] if m * 60 <= elapsed_s]


def mark_dir(save_dir: Path, minutes: float) -> Path:
    """Where mark `minutes` is saved: `<save_dir>/<minutes>/` (30 → `30`, 0.5 → `0.5`)."""
    return save_dir / f"{minutes:g}"


def save_at_marks(model, source_dir: Path, save_dir: Path, marks: list[float], step: int) -> Path:
    """Write the model once as `<mark_dir>/v<step>/` for the first of `marks`, linked into the others' directories;
    the first one's path."""
    from ops.experiments.learning.files import link_tree
    from slca.weights.publish import write_version

    first = mark_dir(save_dir, marks[0])
    write_version(model, source_dir, first, step, step, str(source_dir))
    for other in marks[1:]:
        link_tree(first / f"v{step}", mark_dir(save_dir, other) / f"v{step}")
    return first / f"v{step}"


def make_save_callback(spec, counts):
    """A `TrainerCallback` that saves at `spec.save_minutes` and stops training after the last; each save appended
    to `counts.checkpoints`."""
    from transformers import TrainerCallback

    marks = sorted(spec.save_minutes)
    save_dir, source = Path(spec.save_dir), Path(spec.model)
    start = spec.clock_start or time.time()

    class SaveMarks(TrainerCallback):
        def on_step_end(self, args, state, control, model=None, **kw):
            elapsed = time.time() - start
            due = due_marks(marks, len(counts.checkpoints), elapsed)
            if due:
                save_at_marks(getattr(model, "module", model), source, save_dir, due, state.global_step)
                # the window's figures as the deadline callback (listed first) has just counted this step: after
                # the cold first step, as `slca bench rl` counts
                for m in due:
                    counts.checkpoints.append(
                        {
                            "minutes": m,
                            "elapsed_s": round(elapsed, 1),
                            "step": state.global_step,
                            "updates": counts.updates,
                            "completions_trained": counts.completions_trained,
                            "trained_tokens": counts.trained_tokens,
                        }
                    )
            if len(counts.checkpoints) == len(marks):
                control.should_training_stop = True

    return SaveMarks()
