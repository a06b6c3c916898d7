"""Settings of the supervisor (`slca up`) and the task feed."""

from slca.config import SectionSettings


class OpsSettings(SectionSettings):
    status_interval_s: float = 5.0
    """Seconds between live status table refreshes."""
