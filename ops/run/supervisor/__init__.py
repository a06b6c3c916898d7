"""Process supervision for `slca up`: run, restart with back-off, stop cleanly."""

from ops.run.supervisor.process import Backoff, ManagedProcess, ProcessSpec, ProcessState
from ops.run.supervisor.supervisor import Supervisor

__all__ = ["Backoff", "ManagedProcess", "ProcessSpec", "ProcessState", "Supervisor"]
