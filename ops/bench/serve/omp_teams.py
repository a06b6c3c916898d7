"""Why the in-process vLLM engine is built and stepped on one thread (serve/engines/vllm_engine.py `_drive`).

libgomp keeps an OpenMP thread team for every thread that ever ran a parallel region. Once the teams of a process
hold more threads than it has CPUs, libgomp shortens the spin-wait of every team to almost nothing, and each
parallel region then pays futex wake-ups. This measures one small bf16 linear (a decode step's shape for the
embedded 135M model: 1 × 576 by 576 × 1536) per call on a thread whose team is the only one (A), and on a thread
while a second team exists (B: another thread has run one parallel region and is still alive); the thread count
is torch's default. A and B alternate, each in a fresh thread, the first side of each pair alternating.

    .venv/bin/python -m ops.bench.serve.omp_teams [pairs] [out.json]

Prints one JSON line per window and a summary (µs per call, B ÷ A per pair, load, CPU flags); with `out.json`,
writes the windows and the summary there too.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time

import torch

CALLS = 20_000
WARM_CALLS = 2_000


def _per_call_us(x: torch.Tensor, w: torch.Tensor) -> float:
    linear = torch.nn.functional.linear
    for _ in range(WARM_CALLS):
        linear(x, w)
    t0 = time.perf_counter()
    for _ in range(CALLS):
        linear(x, w)
    return (time.perf_counter() - t0) / CALLS * 1e6


def _window(second_team: bool, x: torch.Tensor, w: torch.Tensor) -> float:
    """µs per call on a fresh thread; with `second_team`, while another live thread holds a team of its own."""
    release = threading.Event()
    holding = threading.Event()

    def hold() -> None:
        torch.nn.functional.linear(x, w)  # one parallel region: this thread now owns a team
        holding.set()
        release.wait()

    holder = threading.Thread(target=hold) if second_team else None
    if holder is not None:
        holder.start()
        holding.wait()
    result: list[float] = []
    worker = threading.Thread(target=lambda: result.append(_per_call_us(x, w)))
    worker.start()
    worker.join()
    if holder is not None:
        release.set()
        holder.join()  # its team goes with it
    return result[0]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("pairs", type=int, nargs="?", default=3, help="alternated A/B pairs")
    p.add_argument("out", nargs="?", help="write the windows and the summary here (JSON)")
    args = p.parse_args()
    pairs = args.pairs
    x = torch.randn(1, 576, dtype=torch.bfloat16)
    w = torch.randn(1536, 576, dtype=torch.bfloat16)
    load_start = os.getloadavg()
    ratios, windows = [], []
    for pair in range(pairs):
        sides = {}
        for side in ("A", "B") if pair % 2 == 0 else ("B", "A"):
            sides[side] = _window(side == "B", x, w)
            windows.append({"pair": pair, "side": side, "us_per_call": round(sides[side], 1)})
            print(json.dumps(windows[-1]), flush=True)
        ratios.append(sides["B"] / sides["A"])
    flags = sorted(
        {f for f in open("/proc/cpuinfo").read().split() if f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16")}
    )
    summary = {
        "command": "python -m ops.bench.serve.omp_teams " + " ".join(sys.argv[1:]),
        "A": "a thread whose OpenMP team is the process's only one",
        "B": "a thread while a second thread holds a team of its own",
        "per_call": "torch.nn.functional.linear, bf16, 1 × 576 by 576 × 1536",
        "torch_threads": torch.get_num_threads(),
        "cpus": os.cpu_count(),
        "two_teams_over_one_median": round(statistics.median(ratios), 2),
        "min_max": [round(min(ratios), 2), round(max(ratios), 2)],
        "load_start_end": [round(load_start[0], 2), round(os.getloadavg()[0], 2)],
        "cpu_flags": flags,
    }
    print(json.dumps(summary), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({**summary, "windows": windows}, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
