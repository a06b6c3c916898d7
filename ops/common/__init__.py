"""What the ops rooms share, one floor below them: modules here import slca and the components, never
`ops.run`, `ops.observe`, `ops.experiments` or `ops.bench` (`tests/test_import_cycles.py`), so that every room may
import them and no import runs back up (docs/design.md#components).

- `tasks.py`, `builtin_tasks.py`: a pack's tasks (the feed's, the evaluation's, the estimator comparison's);
- `machine.py`: what a result must say about the machine it ran on;
- `up_state.py`: the state file `slca up` writes and `slca status`, `slca bench online` and the benches read.
"""
