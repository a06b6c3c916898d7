"""`slca bench serve`: the baseline configured as slca's engine, like-against-like comparisons alternated by
ops/bench/ab.py (fake servers), its arithmetic and paths; and a smoke run on the tiny model (slow)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from ops.bench.ab import MachinePathError, WindowRule
from ops.bench.common import percentile
from ops.bench.serve.load import AGENT, CHAT, Sample, Workload, request_body
from ops.bench.serve.main import SIDE_API, compare
from ops.bench.serve.report import summarise, table_row, write
from ops.bench.servers import BENCH_MODEL, engine_flags, vllm_server_cmd
from slca.cli import main
from slca.models.precision import cuda_available


def test_percentiles_are_nearest_rank():
    values = [0.5, 0.1, 0.4, 0.2, 0.3]
    assert percentile(values, 50) == 0.3 and percentile(values, 95) == 0.5 and percentile(values, 0) == 0.1
    assert percentile([], 50) is None


def test_summary_counts_failures_apart():
    samples = [Sample(10, 1.0, 0.2), Sample(30, 2.0, 0.4), Sample(0, 0.1, None, "HTTP 503: busy")]
    row = summarise("slca-vllm-core", "agent", 16, samples, 4.0)
    assert (row.requests, row.failed, row.tokens, row.tokens_per_s, row.requests_per_s) == (3, 1, 40, 10.0, 0.5)
    assert row.first_error == "HTTP 503: busy" and row.ttft_p50_s == 0.2 and row.latency_p95_s == 2.0


def test_the_baseline_server_gets_slcas_engine_arguments_as_flags():
    kwargs = {
        "model": "/m/SmolLM2",
        "dtype": "bfloat16",
        "enforce_eager": True,
        "max_model_len": 4096,
        "max_num_seqs": 64,
        "gpu_memory_utilization": 0.9,
        "seed": 0,
        "disable_log_stats": True,
        "enable_chunked_prefill": False,
        "max_num_batched_tokens": 4096,
    }
    cmd = vllm_server_cmd(1234, kwargs)
    text = " ".join(cmd)
    for flag in (
        "--dtype bfloat16",
        "--enforce-eager",
        "--max-model-len 4096",
        "--max-num-seqs 64",
        "--no-enable-chunked-prefill",
        "--max-num-batched-tokens 4096",
        "--seed 0",
        "--disable-log-stats",
        "--port 1234",
        f"--served-model-name {BENCH_MODEL}",
        "--model /m/SmolLM2",
    ):
        assert flag in text
    assert engine_flags({"x_y": None, "a": False}) == ["--no-a"]


def test_project_engine_kwargs_are_the_engines_own_and_leave_the_environment_alone(monkeypatch):
    from ops.bench.servers import project_engine_kwargs

    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)
    monkeypatch.delenv("VLLM_XGRAMMAR_CACHE_MB", raising=False)
    settings = SimpleNamespace(
        dtype="float32",
        max_model_len=1024,
        max_batch=8,
        gpu_memory_utilization=0.5,
        kv_cache_gib=3.0,
        vllm_grammar_cache_mib=64,
    )
    kwargs = project_engine_kwargs("m", settings)
    assert kwargs["max_num_seqs"] == 8 and kwargs["enforce_eager"] is True and kwargs["dtype"] == "float32"
    if not cuda_available():  # an argument, so that it reaches vLLM's server as a flag
        assert kwargs["kv_cache_memory_bytes"] == 3 * 2**30
    assert "VLLM_CPU_KVCACHE_SPACE" not in __import__("os").environ
    assert "VLLM_XGRAMMAR_CACHE_MB" not in __import__("os").environ


def test_request_bodies_stream_or_not_and_agent_runs_are_recorded():
    assert request_body(CHAT, 3, 8, "m")["stream"] is True
    assert "stream" not in request_body(CHAT, 3, 8, "m", stream=False)
    agent = request_body(AGENT, 3, 8, "m", stream=False)
    assert agent["record"] is True and "stream" not in agent and agent["seed"] == 3


def test_comparisons_are_like_against_like():
    assert SIDE_API["chat-stream"] == ((CHAT, True), (CHAT, True))
    assert SIDE_API["chat-whole"] == ((CHAT, False), (CHAT, False))
    assert SIDE_API["agent"] == ((CHAT, False), (AGENT, False))  # non-streamed against non-streamed


class FakeServers:
    """Baseline: 100 tokens per wave in 1 s; target: 150 in 1 s; the warm-up (8 tokens) is logged apart."""

    def __init__(self):
        self.calls, self.workloads = [], []

    def __call__(self, url, api, clients, requests, max_tokens, model, stream, workload):
        self.calls.append((url, api, stream, max_tokens))
        self.workloads.append(workload)
        if max_tokens == 8:
            return [Sample(999, 0.01, 0.01)], 0.01
        tokens = 100 if url == "base" else 150
        return [Sample(tokens // requests, 0.5, 0.1 if stream else None) for _ in range(requests)], 1.0


def test_compare_alternates_the_two_servers_and_excludes_warm_up():
    fake = FakeServers()
    args = SimpleNamespace(
        min_requests=2,
        max_tokens=64,
        baseline="vllm-server",
        pairs=3,
        order="alternate",
        seed=0,
        prompts="tools",
        agent_turns=3,
    )
    row = compare("slca-vllm-core", "agent", 2, "base", "target", args, WindowRule(min_waves=2), measure=fake)
    warm = [c for c in fake.calls if c[3] == 8]
    assert warm == [("base", CHAT, False, 8), ("target", AGENT, False, 8)]
    assert set(fake.workloads) == {Workload("tools", 3)}  # warm-up and windows alike
    measured = [c[0] for c in fake.calls if c[3] == 64]
    # A A B B | B B A A | A A B B: two waves per window, first side alternating
    assert measured == ["base"] * 2 + ["target"] * 4 + ["base"] * 4 + ["target"] * 2
    s = row.result.summary()
    assert s["ratio_b_over_a"] == [1.5, 1.5, 1.5] and s["median_a"] == 100 and s["median_b"] == 150
    assert row.a.tokens == 600 and row.b.tokens == 900 and row.a.seconds == 6.0  # warm-up's 999 not counted
    assert row.a.api == CHAT and row.b.api == AGENT and row.a.target == "vllm-server chat"
    line = table_row(row)
    assert "| slca-vllm-core | agent | 2 | 3 | 100.0 | 150.0 | 1.50× | 1.50–1.50 (75%) |" in line


def test_write_refuses_machine_paths_and_writes_the_rows(tmp_path):
    fake = FakeServers()
    args = SimpleNamespace(
        min_requests=1,
        max_tokens=64,
        baseline="vllm-server",
        pairs=3,
        order="alternate",
        seed=0,
        prompts="short",
        agent_turns=1,
    )
    row = compare("slca-hf", "chat-stream", 1, "base", "target", args, WindowRule(), measure=fake)
    with pytest.raises(MachinePathError):
        write(tmp_path / "x", [row], {"command": "slca bench serve", "model": "/home/me/m"}, [])
    write(tmp_path / "ok", [row], {"command": "slca bench serve", "model": "m"}, ["POST /v1/agent/runs"])
    data = json.loads((tmp_path / "ok" / "results.json").read_text())
    assert data["rows"][0]["median_ratio"] == 1.5 and data["rows"][0]["comparison"] == "chat-stream"
    assert len(data["rows"][0]["windows"]) == 6
    assert "| slca-hf | chat-stream |" in (tmp_path / "ok" / "table.md").read_text()


@pytest.mark.slow
def test_bench_serve_smoke_writes_table_and_json(tiny_model_dir, tmp_path, capsys):
    out = tmp_path / "serve"
    rc = main(
        [
            "--set",
            f"common.model={tiny_model_dir}",
            "--set",
            "serve.torch_threads=1",
            "--set",
            "serve.max_model_len=512",
            "bench",
            "serve",
            "--baseline",
            "slca-hf",
            "--targets",
            "slca-hf",
            "--hf-clients",
            "1",
            "--min-requests",
            "1",
            "--waves",
            "1",
            "--window-s",
            "0",
            "--max-tokens",
            "4",
            "--pairs",
            "3",
            "--prompts",
            "short",
            "--out",
            str(out),
        ]
    )
    printed = capsys.readouterr().out
    assert rc == 0, printed
    results = json.loads((out / "results.json").read_text())
    assert [(r["comparison"], r["clients"], r["pairs"]) for r in results["rows"]] == [
        ("chat-stream", 1, 3),
        ("chat-whole", 1, 3),
        ("agent", 1, 3),
    ]
    assert results["rows"][0]["measured"]["ttft_p50_s"] is not None and results["rows"][0]["median_ratio"] > 0
    assert str(tmp_path) not in (out / "results.json").read_text() + (out / "table.md").read_text()


def test_recorded_command_leaves_out_the_output_directory():
    from ops.bench.common import bench_command

    argv = ["slca", "--set", "a=b", "bench", "serve", "--clients", "1,16", "--out", "/x/y", "--max-tokens=8"]
    assert bench_command("serve", argv) == "slca bench serve --clients 1,16 --max-tokens=8"
    assert bench_command("swap", ["slca", "bench", "swap", "--out=/x"]) == "slca bench swap"


def test_an_interrupted_bench_resumes_with_the_rows_it_had_and_starts_no_server_it_does_not_need(tmp_path, monkeypatch):
    from contextlib import contextmanager

    import ops.bench.serve.main as bench
    import slca.redis_server

    started: list[str] = []
    measured: list[tuple] = []

    @contextmanager
    def server(target, *a):
        started.append(target)
        yield "base" if target == "vllm-server" else "target"

    def fake_compare(target, comparison, clients, base_url, url, args, rule):
        if len(measured) == stop_after:
            raise KeyboardInterrupt
        measured.append((target, comparison, clients))
        return compare(target, comparison, clients, base_url, url, args, rule, measure=FakeServers())

    class NoRedis:
        def __init__(self, *a, **k):
            self.url = "redis://unused"

        def start(self):
            return self

        def kill(self):
            pass

    monkeypatch.setattr(bench, "_server", server)
    monkeypatch.setattr(bench, "compare", fake_compare)
    monkeypatch.setattr(bench, "_baseline_flags", lambda *a: [])
    monkeypatch.setattr(slca.redis_server, "RedisServer", NoRedis)
    monkeypatch.setattr("sys.argv", ["slca", "bench", "serve"])
    args = SimpleNamespace(
        baseline="vllm-server",
        targets=["slca-vllm-core", "slca-hf"],
        comparisons=["chat-whole", "agent"],
        clients=[1, 16],
        hf_clients=[1],
        waves=1,
        window_s=0.0,
        pairs=3,
        order="alternate",
        seed=0,
        max_tokens=64,
        min_requests=1,
        prompts="tools",
        agent_turns=3,
        out=tmp_path / "serve",
    )
    settings, common = SimpleNamespace(dtype="float32"), SimpleNamespace(model_path=lambda: tmp_path / "model")
    stop_after = 4  # every slca-vllm-core row, then the interruption on slca-hf's first
    with pytest.raises(KeyboardInterrupt):
        bench.run_serve_bench(settings, common, args)
    assert started == ["vllm-server", "slca-vllm-core", "slca-hf"]
    started.clear(), measured.clear()
    stop_after = -1
    assert bench.run_serve_bench(settings, common, args) == 0
    assert started == ["vllm-server", "slca-hf"]  # slca-vllm-core's rows were all done: not started again
    assert measured == [("slca-hf", "chat-whole", 1), ("slca-hf", "agent", 1)]
    rows = json.loads((tmp_path / "serve" / "results.json").read_text())["rows"]
    assert [(r["target"], r["comparison"], r["clients"]) for r in rows] == [
        ("slca-vllm-core", "chat-whole", 1),
        ("slca-vllm-core", "chat-whole", 16),
        ("slca-vllm-core", "agent", 1),
        ("slca-vllm-core", "agent", 16),
        ("slca-hf", "chat-whole", 1),
        ("slca-hf", "agent", 1),
    ]
    args.pairs = 4
    with pytest.raises(Exception, match="other settings"):
        bench.run_serve_bench(settings, common, args)
