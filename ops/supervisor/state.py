"""The small state file `slca up` keeps for `slca status` (`<data_dir>/up-state.json`), written atomically."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

STATE_FILE = "up-state.json"


def state_path(data_dir: str | Path) -> Path:
    return Path(data_dir) / STATE_FILE


def describe(supervisor, extra: dict[str, Any]) -> dict[str, Any]:
    return {
        **extra,
        "supervisor_pid": os.getpid(),
        "updated_at": time.time(),
        "processes": [
            {"name": p.spec.name, "pid": p.pid, "state": p.state.value, "restarts": p.restarts,
             "uptime_s": round(p.uptime(), 1), "last_exit": p.last_exit, "log": str(p.spec.log_path),
             "url": p.spec.url, "ready": supervisor.is_ready(p.spec.name)}  # fmt: skip
            for p in supervisor.processes
        ],
    }


def write_state(path: Path, state: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=1))
    os.replace(tmp, path)  # readers never see a half-written file


def read_state(path: Path) -> dict[str, Any] | None:
    try:
        state = json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    pid = state.get("supervisor_pid")
    state["alive"] = bool(pid) and _pid_alive(int(pid))
    return state


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
