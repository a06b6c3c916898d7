"""HierR scoring (docs/design.md#hierr). Public API: `score_trajectory(traj, settings) -> Reward`."""

from workers.scoring.extract import ScoringError
from workers.scoring.hierr import score_trajectory
from workers.scoring.judges import TransientJudgeError

__all__ = ["ScoringError", "TransientJudgeError", "score_trajectory"]
