"""Typed, versioned contracts that cross process boundaries (DESIGN.md §2-3)."""

from slca.contracts.group import RolloutGroup
from slca.contracts.queues import Streams
from slca.contracts.reward import CallScore, Reward
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
    "Reward",
    "RolloutGroup",
    "SCHEMA_VERSION",
    "Segment",
    "SegmentKind",
    "Streams",
    "ToolCallRecord",
    "Trajectory",
    "WeightManifest",
    "dump_json",
    "dump_msgpack",
    "load_json",
    "load_msgpack",
]
