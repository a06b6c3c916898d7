"""Typed, versioned contracts that cross process boundaries (docs/design.md#contracts)."""

from slca.contracts.group import RolloutGroup
from slca.contracts.queues import Streams, decode_entry, encode_entry
from slca.contracts.task import Task
from slca.contracts.tools import Episode, Tool, ToolProvider, ToolResult
from slca.contracts.reward import CallScore, Reward
from slca.contracts.stats import LearnerStepStats, RewardStats
from slca.contracts.trajectory import (
    GENERATED_KINDS,
    GoldCall,
    GroundTruth,
    Segment,
    SegmentKind,
    ToolCallRecord,
    Trajectory,
)
from slca.contracts.weights import WeightManifest
from slca.contracts.wire import ContractError, SCHEMA_VERSION, dump_json, dump_msgpack, load_json, load_msgpack

__all__ = [
    "CallScore",
    "ContractError",
    "GENERATED_KINDS",
    "GoldCall",
    "GroundTruth",
    "LearnerStepStats",
    "Reward",
    "RewardStats",
    "RolloutGroup",
    "SCHEMA_VERSION",
    "Segment",
    "SegmentKind",
    "Streams",
    "Task",
    "Tool",
    "ToolProvider",
    "ToolResult",
    "Episode",
    "decode_entry",
    "encode_entry",
    "ToolCallRecord",
    "Trajectory",
    "WeightManifest",
    "dump_json",
    "dump_msgpack",
    "load_json",
    "load_msgpack",
]
