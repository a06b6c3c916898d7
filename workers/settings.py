"""Settings of the scoring workers, stream consumer and group assembler."""

from slca.config import SectionSettings


class WorkerSettings(SectionSettings):
    group_size: int = 4
    """G: rollouts per task in one group."""
    concurrency: int = 1
    """Celery worker processes."""
