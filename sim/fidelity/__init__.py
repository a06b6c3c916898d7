"""How far SGLS strays from the real tools, measured by program: `slca sim fidelity`.

`episodes` (what is replayed) → `variants` (the failure set) → `replay` (real and simulated, side by side) →
`measures` (per-call records) → `summary` (shares with 95% Wilson intervals) → `report` (the table).
"""

from sim.fidelity.report import write_table
from sim.fidelity.run import measure, write_run

__all__ = ["measure", "write_run", "write_table"]
