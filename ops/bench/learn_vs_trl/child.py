"""The arms' training processes: stopping one that runs past its last mark, and the tail of a failed one's log."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

STOP_GRACE_S = 300.0
"""How long a child gets to stop after SIGINT before its process group is killed."""


def stop(proc: subprocess.Popen, grace_s: float = STOP_GRACE_S) -> None:
    """SIGINT first (`python -m slca` turns it into a KeyboardInterrupt, so `slca train`'s `finally` stops its
    in-process server and its engine's processes), the whole process group (`start_new_session`) if it lingers."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def log_tail(path: Path, lines: int = 15) -> str:
    """The last `lines` lines of a child's log ('' when it wrote none)."""
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.is_file() else ""
