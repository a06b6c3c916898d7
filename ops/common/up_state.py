"""The small state file `slca up` keeps for `slca status` (`<data_dir>/up-state.json`), written atomically."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

STATE_FILE = "up-state.json"
REDIS_URL_FILE = "redis-url"
"""The owned Redis's URL, password included, owner-only (the state file shows it redacted)."""


def state_path(data_dir: str | Path) -> Path:
    return Path(data_dir) / STATE_FILE


def owned_redis_url_path(data_dir: str | Path) -> Path:
    return Path(data_dir) / REDIS_URL_FILE


def owned_redis_url(data_dir: str | Path) -> str | None:
    """The URL of the Redis a `slca up` in `data_dir` owns (or owned last), or None."""
    try:
        return owned_redis_url_path(data_dir).read_text().strip() or None
    except OSError:
        return None


def up_redis_url(data_dir: str, state: dict | None) -> str | None:
    """The Redis of a `slca up` in `data_dir`: the owned one's URL file (it has the password the state file hides),
    else the state file's URL."""
    return owned_redis_url(data_dir) or (state or {}).get("redis_url")


def write_secret(path: Path, text: str) -> None:
    """`text` into `path`, readable by its owner only (the mode is set before the secret is written)."""
    path.touch(mode=0o600)
    path.chmod(0o600)  # touch keeps an existing file's mode
    path.write_text(text + "\n")


def describe(supervisor, extra: dict[str, Any], details: dict[str, str] | None = None) -> dict[str, Any]:
    """The state file's content; `details`: a line per process name for the table (the warm start's progress)."""
    details = details or {}
    return {
        **extra,
        "supervisor_pid": os.getpid(),
        "updated_at": time.time(),
        "processes": [
            {
                "name": p.spec.name,
                "pid": p.pid,
                "state": p.state.value,
                "restarts": p.restarts,
                "uptime_s": round(p.uptime(), 1),
                "last_exit": p.last_exit,
                "killed": p.killed,
                "stop_s": None if p.stop_seconds is None else round(p.stop_seconds, 2),
                "log": str(p.spec.log_path),
                "url": p.spec.url,
                "ready": supervisor.is_ready(p.spec.name),
                "detail": details.get(p.spec.name),
                "after": list(p.spec.after),
            }
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
    state["alive"] = bool(pid) and pid_alive(int(pid))
    return state


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
