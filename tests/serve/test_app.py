"""App wiring: streamed agent runs, recording a share of chat traffic, plugged sub-apps (the dashboard), metrics."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request

import pytest

from serve.settings import ServeSettings
from slca.contracts import Streams, Trajectory, decode_entry
from tests.support.serve import ADMIN_TOKEN, WEATHER_TOOL, run_in_app


def test_agent_runs_stream_progress_events(tiny_model_dir, serve_redis):
    async def scenario(client, app):
        body = {
            "messages": [{"role": "user", "content": "hi"}],
            "tools": [WEATHER_TOOL],
            "task_id": "s1",
            "n": 2,
            "max_tokens": 8,
            "stream": True,
            "record": False,
        }
        r = await client.post("/v1/agent/runs", json=body)
        return r.status, r.headers["Content-Type"], await r.text()

    status, ctype, text = asyncio.run(run_in_app(tiny_model_dir, serve_redis.url, scenario))
    assert status == 200 and ctype.startswith("text/event-stream")
    events = [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: {")]
    assert [e["event"] for e in events] == ["run", "run", "done"]
    assert len(events[-1]["runs"]) == 2 and text.rstrip().endswith("data: [DONE]")


def test_configured_share_of_chat_traffic_becomes_trajectories(tiny_model_dir, serve_redis, rclient):
    settings = ServeSettings(engine="hf", max_model_len=512, torch_threads=1, record_chat_share=1.0, record_chat_n=2)

    async def scenario(client, app):
        r = await client.post(
            "/v1/chat/completions",
            json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 6, "n": 3},
            headers={"Authorization": "Bearer rk"},
        )  # only 'record' keys' traffic is recorded
        return r.status, await r.json()

    status, body = asyncio.run(
        run_in_app(
            tiny_model_dir, serve_redis.url, scenario, settings, stream_prefix="chatrec", api_keys={"rk": ["record"]}
        )
    )
    assert status == 200 and len(body["choices"]) == 3
    recorded = [decode_entry(Trajectory, f) for _, f in rclient.xrange(Streams("chatrec").trajectories)]
    assert len(recorded) == 2 and len({t.task_id for t in recorded}) == 1  # one group of record_chat_n
    assert all(t.num_generated == 6 and t.meta["source"] == "chat" for t in recorded)
    assert {t.group_key for t in recorded} == {recorded[0].task_id}  # one group whatever the versions


def test_metrics_are_served(tiny_model_dir, serve_redis):
    async def scenario(client, app):
        await client.get("/healthz")
        return await (await client.get("/metrics")).text()

    metrics = asyncio.run(run_in_app(tiny_model_dir, serve_redis.url, scenario))
    assert 'slca_requests_total{endpoint="/healthz",status="200"} 1.0' in metrics
    for name in ("slca_policy_version", "slca_swap_seconds", "slca_tokens_generated_total", "slca_backpressure_total"):
        assert name in metrics


def test_slca_serve_mounts_the_plugged_dashboard(hf_server):
    """`slca serve` mounts what the `slca.serve.subapps` entry points plug in (ops' dashboard); serve imports
    no ops module itself."""
    pytest.importorskip("ops.observe.dashboard")
    with urllib.request.urlopen(hf_server.url + "/dashboard/", timeout=30) as page:
        assert page.status == 200 and b"<html" in page.read().lower()
    with pytest.raises(urllib.error.HTTPError) as refused:  # the stats need one of serve's keys
        hf_server.get_json("/dashboard/api/stats?limit=5")
    assert refused.value.code == 401
    req = urllib.request.Request(
        hf_server.url + "/dashboard/api/stats?limit=5", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        assert isinstance(json.loads(r.read()), dict)


def test_create_app_mounts_the_subapps_it_is_given(tiny_model_dir, serve_redis):
    from aiohttp import web

    async def hello(request):
        return web.Response(text="plugged")

    extra = web.Application()
    extra.router.add_get("/", hello)

    async def scenario(client, app):
        r = await client.get("/extra/")
        return r.status, await r.text()

    assert asyncio.run(run_in_app(tiny_model_dir, serve_redis.url, scenario, subapps={"/extra/": extra})) == (
        200,
        "plugged",
    )


def test_agent_tools_run_through_sim_when_installed(tiny_model_dir, serve_redis):
    pytest.importorskip("sim")

    async def scenario(client, app):
        body = {
            "messages": [{"role": "user", "content": "Rome?"}],
            "tools": [WEATHER_TOOL],
            "task_id": "sim1",
            "max_tokens": 96,
            "max_turns": 2,
            "seed": 1,
            "tool_choice": "required",
            "record": False,
            "return_trajectories": True,
        }
        r = await client.post("/v1/agent/runs", json=body)
        return r.status, await r.json()

    status, body = asyncio.run(run_in_app(tiny_model_dir, serve_redis.url, scenario))
    run = body["runs"][0]
    assert status == 200 and run["trajectory"]["meta"]["tools_backend"].startswith("sim")
    assert run["tool_calls"][0]["name"] == "get_weather"
