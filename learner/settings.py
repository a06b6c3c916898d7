"""Settings of the learner."""

from slca.config import SectionSettings


class LearnerSettings(SectionSettings):
    estimator: str = "slca"
    """Advantage estimator: slca | grpo | toolpo | rltr."""
    lr: float = 1e-6
    """AdamW learning rate."""
