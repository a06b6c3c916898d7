"""Per-token weight versions in the engine-core-process mode, from vLLM's version labels (no engine needed)."""

from __future__ import annotations

from types import SimpleNamespace as NS

from serve.engines.vllm_async import VLLMAsyncEngine, _split_by_version


def _engine(version: int = 0) -> VLLMAsyncEngine:
    engine = VLLMAsyncEngine.__new__(VLLMAsyncEngine)  # no tokenizer or vLLM needed for the arithmetic
    engine.version = version
    return engine


def _vllm(starts: dict[str, list[tuple[str, int]]]):
    """An AsyncLLM stand-in holding what its output processor keeps: external → internal ids, label starts."""
    states = {f"{rid}-int": NS(weight_version_starts=s) for rid, s in starts.items()}
    return NS(output_processor=NS(external_req_ids={rid: [f"{rid}-int"] for rid in starts}, request_states=states))


def test_a_running_request_reads_its_label_starts_and_a_finished_one_its_spans():
    engine = _engine(version=2)
    vllm = _vllm({"r": [("0", 0), ("2", 3)]})
    assert engine._versions(vllm, "r", NS(weight_versions=None), 1, 4) == [0, 0, 2, 2]
    spans = [NS(version="1", start=0, end=2), NS(version="2", start=2, end=5)]
    assert engine._versions(vllm, "gone", NS(weight_versions=spans), 0, 5) == [1, 1, 2, 2, 2]
    # no label known (vLLM's initial "default", or a vLLM without the bookkeeping): the version served now
    assert engine._versions(_vllm({"d": [("default", 0)]}), "d", NS(weight_versions=None), 0, 2) == [2, 2]
    assert engine._versions(NS(), "x", NS(weight_versions=None), 0, 1) == [2]


def test_a_delta_straddling_a_swap_becomes_one_step_per_version_and_the_finish_goes_last():
    steps = _split_by_version([5, 6, 7], [-0.1, -0.2, -0.3], None, [1, 1, 2], "stop", current=2)
    assert [(s.token_ids, s.logprobs, s.version, s.finish_reason) for s in steps] == [
        ([5, 6], [-0.1, -0.2], 1, None),
        ([7], [-0.3], 2, "stop"),
    ]
    tops = [[(5, -0.1)], [(9, -0.5)]]
    steps = _split_by_version([5, 6], [-0.1, -0.2], tops, [3, 3], None, current=3)
    assert len(steps) == 1 and steps[0].top_logprobs == tops and steps[0].finish_reason is None
    only_finish = _split_by_version([], [], None, [], "length", current=4)
    assert [(s.token_ids, s.version, s.finish_reason) for s in only_finish] == [([], 4, "length")]
    assert _split_by_version([], [], None, [], None, current=4) == []
