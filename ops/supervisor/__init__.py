"""Process supervision for `slca up`: run, restart with back-off, stop cleanly."""

from ops.supervisor.process import Backoff, ManagedProcess, ProcessSpec, ProcessState
from ops.supervisor.supervisor import Supervisor

__all__ = ["Backoff", "ManagedProcess", "ProcessSpec", "ProcessState", "Supervisor"]
