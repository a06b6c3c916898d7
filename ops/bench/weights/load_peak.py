"""Peak RSS of reading one weight version's safetensors file, the old way (`safetensors.torch.load` of the file's
bytes, what `slca.weights.load_state_dict` did) against `slca.weights.tensor_read` (each tensor read in place);
each read in a fresh child process, alternated A B / B A over 3 pairs. Figures: docs/cpu-facts.md (reading a
weight version).

    .venv/bin/python -m ops.bench.weights.load_peak <model dir>/model.safetensors
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import os, resource, sys, torch
from pathlib import Path
f, how = sys.argv[1], sys.argv[2]
def rss(): return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
from safetensors.torch import load
from slca.weights.tensor_read import read_tensors
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
if how == "old":
    data = Path(f).read_bytes(); state = load(data); del data
else:
    with open(f, "rb") as fh: state, _ = read_tensors(fh, os.fstat(fh.fileno()).st_size)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(peak - base, rss(), sum(t.numel() * t.element_size() for t in state.values()))
"""
"""One read in a fresh interpreter: its peak over what the imports took, its RSS after, the tensors' bytes."""


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("file", help="a weight version's model.safetensors")
    p.add_argument("--pairs", type=int, default=3, help="alternated old/new pairs")
    args = p.parse_args()
    f, pairs = args.file, args.pairs
    rows = []
    for pair in range(pairs):
        for how in ("old", "new") if pair % 2 == 0 else ("new", "old"):
            out = subprocess.run(
                [sys.executable, "-c", CHILD, f, how], capture_output=True, text=True, check=True
            ).stdout.split()
            rows.append(
                {
                    "pair": pair,
                    "how": how,
                    "peak_over_imports_mib": int(out[0]) / 2**20,
                    "tensors_mib": int(out[2]) / 2**20,
                }
            )
            print(rows[-1], flush=True)
    print(json.dumps({"file_mib": os.path.getsize(f) / 2**20, "load": os.getloadavg()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
