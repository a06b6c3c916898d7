"""Queue benchmark: `python bench/queue.py [--trajectories N] [--workers W]` is `slca bench queue`."""

import sys

from slca.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", "queue", *sys.argv[1:]]))
