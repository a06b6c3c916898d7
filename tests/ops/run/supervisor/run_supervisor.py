"""Test helper: a Supervisor over the child commands given as JSON on argv[1]; stops on SIGTERM/SIGINT."""

import json
import logging
import sys
from pathlib import Path

from ops.run.supervisor import Backoff, ProcessSpec, Supervisor
from ops.run.supervisor.up import install_stop_handlers

if __name__ == "__main__":
    logging.basicConfig(level="INFO")
    plan = json.loads(sys.argv[1])
    log_dir = Path(plan["log_dir"])
    specs = [ProcessSpec(name, argv, log_dir / f"{name}.log") for name, argv in plan["children"].items()]
    supervisor = Supervisor(specs, Backoff(0.1, 1.0, 60.0), grace_s=plan["grace_s"], poll_interval_s=0.05)
    install_stop_handlers(supervisor)

    def report(sup):
        pids = {p.spec.name: p.pid for p in sup.processes}
        (log_dir / "pids.json").write_text(json.dumps(pids))

    supervisor.run(on_tick=report, tick_every_s=0.05)
