"""tests.support.processes.run_as_group: a timed-out launcher takes its children with it."""

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.processes import run_as_group
from tests.support.wait import wait_for

LAUNCHER = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
print(child.pid, flush=True)
time.sleep(60)
"""


def test_a_timed_out_launcher_leaves_no_child_behind(tmp_path):
    out = tmp_path / "pid"
    with pytest.raises(subprocess.TimeoutExpired):
        run_as_group(
            [
                sys.executable,
                "-c",
                LAUNCHER.replace("print(child.pid", f"open({str(out)!r}, 'w').write(str(child.pid)); print(child.pid"),
            ],
            timeout=3,
        )
    pid = int(out.read_text())
    assert wait_for(lambda: not running(pid), 10, "the launcher's child to die")


def running(pid: int) -> bool:
    """Alive and not a zombie (an orphan killed here waits for init to reap it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_finished_command_gives_its_output_and_status():
    done = run_as_group(
        [sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"], timeout=30
    )
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "err\n")
