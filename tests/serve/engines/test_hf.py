"""The transformers engine (serve/engines/hf.py): its grammar cache is bounded, and a cancelled row leaves the batch
within one step while the others finish unchanged. (Moved from tests/serve/test_hardening.py.)"""

from __future__ import annotations

import pytest


def _settings(**overrides):
    from serve.settings import ServeSettings

    return ServeSettings(engine="hf", max_model_len=512, torch_threads=1, **overrides)


def test_the_hf_grammar_cache_is_bounded_by_bytes():
    """The hf engine keeps compiled grammars by their size in memory (it kept 64 of any size before)."""
    from serve.engines.hf_grammars import HFGrammars

    grammars = HFGrammars(engine=None, max_bytes=1000)
    for i in range(5):
        grammars._put(f"g{i}", object(), 300)
    assert [g for g in (f"g{i}" for i in range(5)) if g in grammars] == ["g2", "g3", "g4"]
    assert grammars.bytes <= 1000
    grammars._put("huge", object(), 5000)
    assert "huge" not in grammars


@pytest.mark.slow
def test_the_hf_engine_compiles_no_grammar_on_its_batch_thread(tiny_model_dir):
    """A forced call's grammar is compiled by a grammar builder (a process killed at its bound) and only
    deserialised here, before the request joins a batch: it used to compile in the batch thread, unbounded."""
    import asyncio
    import threading

    from serve.engines.base import SamplingParams, generate
    from serve.engines.grammar import forced_schemas
    from serve.engines.grammar_builder import BuilderLimits, GrammarBuilder, Vocabulary
    from serve.engines.hf import HFEngine

    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}

    async def scenario():
        engine = HFEngine(str(tiny_model_dir), _settings())
        engine.grammars = GrammarBuilder(Vocabulary.of(str(tiny_model_dir)), BuilderLimits(start_timeout_s=600))
        await engine.start()
        compiling_threads = []
        import xgrammar as xgr

        original = xgr.GrammarCompiler.compile_grammar

        def spy(self, *args, **kwargs):  # no compile in this process at all
            compiling_threads.append(threading.current_thread().name)
            return original(self, *args, **kwargs)

        xgr.GrammarCompiler.compile_grammar = spy
        try:
            built = await engine.grammars.schema("test", forced_schemas([tool]))
            result = await generate(engine, [1, 2, 3], SamplingParams(max_tokens=32, seed=0, grammar=built.ebnf))
        finally:
            xgr.GrammarCompiler.compile_grammar = original
            await engine.close()
            await engine.grammars.close()
        return engine.tokenizer.decode(result.token_ids), compiling_threads

    text, compiling = asyncio.run(scenario())
    assert text.startswith("<tool_call>") and compiling == []


def test_a_cancelled_row_leaves_the_hf_batch_within_one_step_and_the_others_finish_unchanged(tiny_model_dir):
    """Three requests in one batch; the client of one hangs up: from the next step on the batch computes two rows
    (its KV rows dropped), the two others end exactly as they do alone, and the engine counts them as they leave."""
    import asyncio

    from serve.engines.base import SamplingParams, generate
    from serve.engines.hf import HFEngine

    engine = HFEngine(str(tiny_model_dir), _settings(batch_wait_ms=50))
    prompts = {"a": [1, 2, 3, 4], "b": [5, 6, 7], "c": [8, 9, 10, 11, 12]}
    params = {
        k: SamplingParams(temperature=1.0, max_tokens=40 if k == "a" else n, seed=i)
        for i, (k, n) in enumerate([("a", 0), ("b", 24), ("c", 12)])
    }

    async def main():
        await engine.start()
        widths: list[int] = []
        forward = engine._forward

        def counted_forward(input_ids, *args):  # the rows each forward step computes
            widths.append(int(input_ids.shape[0]))
            return forward(input_ids, *args)

        try:
            alone = {k: await generate(engine, prompts[k], params[k]) for k in ("b", "c")}
            engine._forward = counted_forward
            a = engine.stream(prompts["a"], params["a"])
            first = asyncio.create_task(a.__anext__())
            others = {k: asyncio.create_task(generate(engine, prompts[k], params[k])) for k in ("b", "c")}
            await first
            await a.__anext__()
            await a.aclose()  # what a hang-up does to the handler's stream: the request is cancelled
            cancelled_at = len(widths)  # forward steps started so far (the running one may still be 3 rows)
            together = {k: await task for k, task in others.items()}
            await asyncio.sleep(0.05)  # the batch's own bookkeeping
            return alone, together, widths, cancelled_at, engine.in_flight
        finally:
            engine._forward = forward
            await engine.close()

    alone, together, widths, cancelled_at, in_flight = asyncio.run(main())
    assert widths[0] == 3 and cancelled_at < 20, widths  # one batch, cancelled early in it
    # a leaves within one step; c (12 tokens) leaves when it ends, b (24) runs alone after it
    assert set(widths[cancelled_at + 1 :]) <= {2, 1} and widths[-1] == 1, widths
    for k in ("b", "c"):
        assert together[k].token_ids == alone[k].token_ids and together[k].finish_reason == alone[k].finish_reason
        assert together[k].logprobs == pytest.approx(alone[k].logprobs, abs=1e-4)
    assert in_flight == 0


def test_every_forward_and_sampling_step_runs_on_the_one_torch_thread(tiny_model_dir, tmp_path):
    """Two batches in flight (the second starts while the first runs) and a weight swap between: every forward step,
    every sampling step and the install run on one thread, the engine's torch thread — not on the batches' threads
    (a second OpenMP team in the process slows every bf16 step, docs/cpu-facts.md#serving)."""
    import asyncio
    import threading

    from serve.engines.base import SamplingParams, generate
    from serve.engines.hf import HFEngine
    from slca.weights import WeightVersion
    from tests.support.weights import publish_version

    engine = HFEngine(str(tiny_model_dir), _settings(batch_wait_ms=1))
    seen: list[tuple[str, threading.Thread]] = []

    def recorded(name: str, fn):
        def run(*args):
            seen.append((name, threading.current_thread()))
            return fn(*args)

        return run

    async def main(tmp):
        await engine.start()
        for name in ("_forward", "_sample_step", "_install"):
            setattr(engine, name, recorded(name, getattr(engine, name)))
        try:
            first = asyncio.create_task(generate(engine, [1, 2, 3, 4], SamplingParams(max_tokens=24, seed=1)))
            while not any(name == "_sample_step" for name, _ in seen):  # the first batch is running
                await asyncio.sleep(0.001)
            second = asyncio.create_task(generate(engine, [5, 6, 7], SamplingParams(max_tokens=8, seed=2)))
            await engine.swap_weights(WeightVersion(publish_version(tiny_model_dir, tmp, 1, 1.01).path, 1))
            await asyncio.gather(first, second)
        finally:
            await engine.close()

    asyncio.run(main(tmp_path))
    names = {name for name, _ in seen}
    threads = {thread for _, thread in seen}
    assert names == {"_forward", "_sample_step", "_install"}
    assert len(threads) == 1 and next(iter(threads)).name.startswith("hf-torch"), threads


@pytest.mark.parametrize("shared_prefill", [True, False])
def test_a_prompt_shared_by_several_requests_is_prefilled_once_and_each_ends_as_it_does_alone(
    tiny_model_dir, shared_prefill
):
    """A group's rollouts share one prompt: the batch's prefill computes each distinct prompt once (two rows for
    three requests here, the first prompt sent twice), every decode step then has a row per request, and each
    request ends exactly as it does alone (its own seed and budget on its own copy of the prompt's KV rows).
    `serve.hf_shared_prefill` off: one prefill row per request, the same outputs."""
    import asyncio

    from serve.engines.base import SamplingParams, generate
    from serve.engines.hf import HFEngine

    engine = HFEngine(str(tiny_model_dir), _settings(batch_wait_ms=50, hf_shared_prefill=shared_prefill))
    shared, other = [1, 2, 3, 4, 5, 6], [7, 8, 9]
    requests = [
        (shared, SamplingParams(temperature=1.0, max_tokens=12, seed=1)),
        (shared, SamplingParams(temperature=1.0, max_tokens=20, seed=2)),
        (other, SamplingParams(temperature=1.0, max_tokens=16, seed=3)),
    ]

    async def main():
        await engine.start()
        shapes: list[tuple[int, int]] = []
        forward = engine._forward

        def recorded_forward(input_ids, *args):
            shapes.append(tuple(input_ids.shape))
            return forward(input_ids, *args)

        try:
            alone = [await generate(engine, p, params) for p, params in requests]
            engine._forward = recorded_forward
            together = await asyncio.gather(*(generate(engine, p, params) for p, params in requests))
            return alone, together, shapes
        finally:
            engine._forward = forward
            await engine.close()

    alone, together, shapes = asyncio.run(main())
    assert shapes[0] == (2 if shared_prefill else 3, len(shared)), shapes  # the prefill: two distinct prompts
    assert shapes[1] == (3, 1), shapes  # the first decode step: one row per request
    for a, t in zip(alone, together):
        assert t.token_ids == a.token_ids and t.finish_reason == a.finish_reason
        assert t.logprobs == pytest.approx(a.logprobs, abs=1e-4)


def test_a_prompt_that_starts_like_an_earlier_one_computes_only_the_rest_and_ends_as_it_does_without_the_cache(
    tiny_model_dir, tmp_path
):
    """`serve.hf_prefix_cache_tokens`: an agent run's next turn starts with its previous turn's prompt. Its prefill
    computes only the tokens after the cached prefix; in a batch that mixes a cached prefix with a prompt never seen,
    the new prompt is computed first (all but its last token), so the batch's forward has only short parts left.
    Every request ends exactly as it does on an engine without the cache (same seed: same tokens, logprobs within
    1e-4). A weight swap empties the cache (its rows were computed with the old weights)."""
    import asyncio

    from serve.engines.base import SamplingParams, generate
    from serve.engines.hf import HFEngine
    from slca.weights import WeightVersion
    from tests.support.weights import publish_version

    first = list(range(1, 41))  # 40 tokens: above the cache's 16-token minimum
    next_turn = first + list(range(100, 110))
    sibling = first + [200, 201, 202]
    unseen = list(range(300, 330))
    asks = [
        [(first, SamplingParams(temperature=1.0, max_tokens=10, seed=1))],
        [(next_turn, SamplingParams(temperature=1.0, max_tokens=12, seed=2))],
        [
            (sibling, SamplingParams(temperature=1.0, max_tokens=8, seed=3)),
            (unseen, SamplingParams(temperature=1.0, max_tokens=9, seed=4)),
        ],
    ]

    async def run(engine, record: bool, root):
        root.mkdir()
        await engine.start()
        shapes: list[list[tuple[int, int]]] = []
        forward = engine._forward

        def recorded_forward(input_ids, *args):
            shapes[-1].append(tuple(input_ids.shape))
            return forward(input_ids, *args)

        engine._forward = recorded_forward
        try:
            outputs = []
            for batch in asks:
                shapes.append([])
                outputs.append(await asyncio.gather(*(generate(engine, p, params) for p, params in batch)))
            cached_before_swap = engine._prefix.tokens if record else None
            await engine.swap_weights(WeightVersion(publish_version(tiny_model_dir, root, 1, 1.0).path, 1))
            return outputs, shapes, cached_before_swap, (engine._prefix.tokens if record else None)
        finally:
            await engine.close()

    cached_engine = HFEngine(str(tiny_model_dir), _settings(batch_wait_ms=50, hf_prefix_cache_tokens=4096))
    with_cache, shapes, before_swap, after_swap = asyncio.run(run(cached_engine, True, tmp_path / "cached"))
    without, _, _, _ = asyncio.run(
        run(HFEngine(str(tiny_model_dir), _settings(batch_wait_ms=50)), False, tmp_path / "plain")
    )

    assert shapes[0][0] == (1, len(first))  # nothing cached yet: the whole prompt
    assert shapes[1][0] == (1, len(next_turn) - len(first))  # only the new turn's tokens
    # the unseen prompt first (all but its last token), then one forward: the sibling's 3 new tokens, the unseen's 1
    assert shapes[2][:2] == [(1, len(unseen) - 1), (2, 3)], shapes[2]
    stats = cached_engine.stats
    assert stats.prompt_tokens_reused == len(first) + len(first) + len(unseen) - 1
    assert stats.prompt_tokens_computed == len(first) + 10 + (len(unseen) - 1) + 3 + 1
    for cached_batch, plain_batch in zip(with_cache, without):
        for c, p in zip(cached_batch, plain_batch):
            assert c.token_ids == p.token_ids and c.finish_reason == p.finish_reason
            assert c.logprobs == pytest.approx(p.logprobs, abs=1e-4)
    assert before_swap > 0 and after_swap == 0


def test_the_prefix_cache_is_bounded_and_an_entry_replaces_those_it_extends():
    import torch

    from serve.engines.hf import _common_prefix, _PrefixCache

    def rows(n):
        return [(torch.zeros(1, n, 2), torch.zeros(1, n, 2))]

    cache = _PrefixCache(max_tokens=60)
    a = tuple(range(20))
    cache._put(a, rows(20))
    cache._put(a + (99,) * 10, rows(30))  # extends a: replaces it
    assert list(cache._entries) == [a + (99,) * 10] and cache.tokens == 30
    b = tuple(range(50, 75))
    cache._put(b, rows(25))
    assert cache.tokens == 55
    cache._put(tuple(range(80, 100)), rows(20))  # over 60 tokens: the least recently used (a + ...) leaves
    assert list(cache._entries) == [b, tuple(range(80, 100))] and cache.tokens == 45
    assert cache.longest(list(b[:10]) + [7]) == 0  # 10 common tokens: below the minimum
    assert cache.longest(list(b) + [1, 2]) == len(b)
    assert cache.longest(list(b)) == len(b) - 1  # the last token is always computed
    assert [_common_prefix((1, 2, 3, 4), (1, 2, 9), 10), _common_prefix((1, 2), (1, 2), 1)] == [2, 1]


def _generate_together(model_dir, requests, **overrides):
    """Every (prompt, params) of `requests` sent at once to a fresh hf engine with `overrides`; their outputs."""
    import asyncio

    from serve.engines.base import generate
    from serve.engines.hf import HFEngine

    async def run():
        engine = HFEngine(str(model_dir), _settings(batch_wait_ms=50, **overrides))
        await engine.start()
        try:
            return await asyncio.gather(*(generate(engine, p, params) for p, params in requests))
        finally:
            await engine.close()

    return asyncio.run(run())


@pytest.mark.parametrize("attention", ["grouped_decode", "eager"])
def test_each_attention_kernel_generates_what_sdpa_does(tiny_model_dir, attention):
    """`serve.hf_attention`: two prompts of different lengths in one batch (a padded row), sampled with fixed seeds:
    the same tokens as with SDPA, logprobs within 1e-4 (fp32; the tiny model has grouped-query attention, two
    query heads on one KV head)."""
    from serve.engines.base import SamplingParams

    requests = [
        ([5, 6, 7, 8, 9, 10, 11], SamplingParams(temperature=1.0, max_tokens=16, seed=1)),
        ([12, 13, 14], SamplingParams(temperature=1.0, max_tokens=12, seed=2)),
    ]
    reference = _generate_together(tiny_model_dir, requests, hf_attention="sdpa")
    other = _generate_together(tiny_model_dir, requests, hf_attention=attention)
    for r, o in zip(reference, other):
        assert o.token_ids == r.token_ids and o.finish_reason == r.finish_reason
        assert o.logprobs == pytest.approx(r.logprobs, abs=1e-4)


def test_a_roomy_kv_cache_holds_what_transformers_cache_holds_through_growth_and_row_selection():
    """`serve.hf_kv_room_tokens` (serve/engines/hf_kv.py): positions written in place into buffers with room; the
    keys and values attention sees equal DynamicCache's after a prefill, decode steps across a growth, and rows
    leaving or repeated."""
    import torch
    from transformers import DynamicCache

    from serve.engines.hf_kv import RoomyCache

    roomy, plain = RoomyCache(2), DynamicCache()
    steps = [torch.randn(3, 2, 5, 4)] + [torch.randn(3, 2, 1, 4) for _ in range(4)]
    for i, k in enumerate(steps):
        if i == 3:  # a row leaves, another is repeated
            for cache in (roomy, plain):
                cache.batch_select_indices(torch.tensor([2, 0, 0]))
        for cache in (roomy, plain):
            keys, values = cache.update(k, -k, 0)
        assert torch.equal(keys, plain.layers[0].keys) and torch.equal(values, plain.layers[0].values)
        assert roomy.get_seq_length() == plain.get_seq_length()
    assert roomy.layers[0]._k_buf.shape[-2] > roomy.get_seq_length()  # room left after the last growth


def test_the_roomy_kv_cache_generates_what_transformers_cache_does(tiny_model_dir):
    """The engine with a small room (buffers grow during decoding), rows of different lengths finishing at different
    steps and one prompt shared by two requests: the same tokens and logprobs as with DynamicCache (room 0)."""
    from serve.engines.base import SamplingParams

    requests = [
        ([5, 6, 7, 8, 9, 10, 11], SamplingParams(temperature=1.0, max_tokens=16, seed=1)),
        ([5, 6, 7, 8, 9, 10, 11], SamplingParams(temperature=1.0, max_tokens=9, seed=3)),
        ([12, 13, 14], SamplingParams(temperature=1.0, max_tokens=12, seed=2)),
    ]
    reference = _generate_together(tiny_model_dir, requests, hf_kv_room_tokens=0)
    roomy = _generate_together(tiny_model_dir, requests, hf_kv_room_tokens=3)
    for r, o in zip(reference, roomy):
        assert o.token_ids == r.token_ids and o.finish_reason == r.finish_reason
        assert o.logprobs == pytest.approx(r.logprobs, abs=1e-5)


def test_the_hf_device_and_dtype_resolve_from_what_torch_sees():
    """`serve.hf_device` / `serve.hf_dtype` 'auto': CUDA in bfloat16 (slca/models/precision.py's choice there) when
    torch sees a GPU, else the CPU in float32 as before (the logprob reference, whatever bf16 units the CPU has); an
    explicit dtype wins on either device."""
    from pydantic import ValidationError

    from serve.engines.hf import placement
    from slca.models.precision import cuda_available

    def resolved(cuda, **overrides):
        p = placement(_settings(**overrides), cuda=cuda)
        return p.device, p.precision.dtype

    assert resolved(False) == ("cpu", "float32")
    assert resolved(True) == ("cuda", "bfloat16")
    assert resolved(True, hf_dtype="float32") == ("cuda", "float32")
    assert resolved(True, hf_device="cpu") == ("cpu", "float32")
    assert resolved(False, hf_dtype="bfloat16") == ("cpu", "bfloat16")
    assert placement(_settings()).device == ("cuda" if cuda_available() else "cpu")  # this machine
    with pytest.raises(ValidationError):
        _settings(hf_device="tpu")


def test_hf_device_cuda_without_a_gpu_is_refused_at_start_before_loading(tiny_model_dir, monkeypatch):
    """`serve.hf_device=cuda` where torch sees no GPU: a clear EngineError from `start`, before the model loads — not
    a traceback from inside the first forward step."""
    import asyncio

    from serve.engines.base import EngineError
    from serve.engines.hf import HFEngine

    monkeypatch.setattr("serve.engines.hf.cuda_available", lambda: False)
    engine = HFEngine(str(tiny_model_dir), _settings(hf_device="cuda"))
    try:
        with pytest.raises(EngineError, match=r"hf_device=cuda.*no CUDA device"):
            asyncio.run(engine.start())
        assert engine.model is None
    finally:
        asyncio.run(engine.close())


def test_the_model_and_every_tensor_of_a_batch_live_on_the_resolved_device(tiny_model_dir):
    """Every parameter on the engine's device in its dtype; each forward step's ids, mask and positions and the KV
    cache there too; a seeded sample draws the same tokens again (here: the CPU, float32)."""
    import asyncio

    from serve.engines.base import SamplingParams, generate
    from serve.engines.hf import HFEngine

    engine = HFEngine(str(tiny_model_dir), _settings(batch_wait_ms=1))
    devices: set[str] = set()

    async def main():
        await engine.start()
        forward = engine._forward

        def recorded_forward(input_ids, mask, positions, cache):
            out = forward(input_ids, mask, positions, cache)
            devices.update(t.device.type for t in (input_ids, mask, positions, cache.layers[0].keys, out[0]))
            return out

        engine._forward = recorded_forward
        try:
            params = SamplingParams(temperature=1.0, max_tokens=12, seed=7, top_logprobs=2)
            return [await generate(engine, [1, 2, 3, 4, 5], params) for _ in range(2)]
        finally:
            engine._forward = forward
            await engine.close()

    first, again = asyncio.run(main())
    expected = "cuda" if engine.placement.device == "cuda" else "cpu"
    params = list(engine.model.parameters())
    assert {p.device.type for p in params} == {expected} == devices
    assert {str(p.dtype) for p in params} == {f"torch.{engine.placement.precision.dtype}"}
    assert engine.device == expected and (expected != "cpu" or engine.placement.precision.dtype == "float32")
    assert first.token_ids == again.token_ids and first.logprobs == again.logprobs


def test_the_grammar_mask_off_the_cpu_forbids_what_xgrammars_cpu_kernel_does():
    """`_masked`, the grammar bitmask applied on the logits' own device (CUDA, where xgrammar's kernel would need
    Triton to compile): the same -inf as xgrammar's CPU kernel, for a vocabulary that is not a multiple of 32."""
    xgr = pytest.importorskip("xgrammar")
    import torch

    from serve.engines.hf import _masked

    vocab = 100
    bitmask = xgr.allocate_token_bitmask(1, vocab)
    bitmask.copy_(
        torch.randint(-(2**31), 2**31 - 1, bitmask.shape, dtype=torch.int32, generator=torch.Generator().manual_seed(0))
    )
    scores = torch.randn(vocab)
    expected = scores.clone().unsqueeze(0)
    xgr.apply_token_bitmask_inplace(expected, bitmask)
    assert torch.equal(_masked(scores, bitmask), expected[0])
    assert 0 < int(torch.isinf(expected).sum()) < vocab
