"""API keys and scopes: recording training data needs 'record', admin endpoints need 'admin', serving is open."""

from __future__ import annotations

import asyncio

import pytest

from serve.auth import granted
from serve.settings import ServeSettings
from slca.config import CommonSettings, ConfigError, load_config
from slca.contracts import Streams, Trajectory, decode_entry
from tests.support.serve import agent_run_body, run_in_app

RECORD_KEY, SERVE_KEY, ADMIN = "rec-key-1", "serve-key-1", "admin-tok-1"
KEYS = {RECORD_KEY: ["record"], SERVE_KEY: ["serve"]}
GROUND_TRUTH = {"calls": [{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "c"}}]}


def _auth(key: str | None) -> dict:
    return {"Authorization": f"Bearer {key}"} if key else {}


def _recorded(rclient, prefix: str) -> list[Trajectory]:
    return [decode_entry(Trajectory, f) for _, f in rclient.xrange(Streams(prefix).trajectories)]


def test_granted_scopes_nest_and_unknown_keys_hold_none():
    common = CommonSettings(api_keys={**KEYS, "both": ["serve", "record"]}, record_key="feed", admin_token=ADMIN)
    assert granted(common, RECORD_KEY) == {"serve", "record"}
    assert granted(common, SERVE_KEY) == {"serve"}
    assert granted(common, "feed") == {"serve", "record"}
    assert granted(common, ADMIN) == {"serve", "record", "admin"}  # the admin token keeps working, as admin
    assert granted(common, "nope") is None and granted(common, None) is None
    assert granted(common, RECORD_KEY[:-1]) is None


def test_keys_load_from_the_environment_and_bad_scopes_never_echo_the_key(monkeypatch):
    monkeypatch.setenv("SLCA_API_KEYS", '{"k-env": ["record"]}')
    assert load_config().common.api_keys == {"k-env": ["record"]}
    monkeypatch.setenv("SLCA_API_KEYS", '{"secret-k": ["root"]}')
    with pytest.raises(ConfigError) as exc:
        load_config().common
    assert "secret-k" not in str(exc.value) and "scopes" in str(exc.value)


def test_agent_runs_record_only_with_a_record_key(tiny_model_dir, serve_redis, rclient):
    async def scenario(client, app):
        out = {}
        for name, key in [
            ("none", None),
            ("wrong", "nope"),
            ("serve", SERVE_KEY),
            ("record", RECORD_KEY),
            ("admin", ADMIN),
        ]:
            r = await client.post(
                "/v1/agent/runs", json=agent_run_body(f"auth-{name}", ground_truth=GROUND_TRUTH), headers=_auth(key)
            )
            out[name] = (r.status, await r.json())
        r = await client.post("/v1/agent/runs", json=agent_run_body("auth-off", record=False))
        out["off"] = (r.status, await r.json())
        return out

    out = asyncio.run(
        run_in_app(tiny_model_dir, serve_redis.url, scenario, stream_prefix="authrec", api_keys=KEYS, admin_token=ADMIN)
    )
    for name in ("none", "wrong", "serve"):  # served, not recorded, and the response says why
        status, body = out[name]
        assert status == 200 and len(body["runs"]) == 2, body
        assert "'record' scope" in body["record_refused"]
        assert all(run["recorded"] is False and run["record_refused"] for run in body["runs"])
    for name in ("record", "admin"):
        status, body = out[name]
        assert status == 200 and "record_refused" not in body
        assert all(run["recorded"] is True for run in body["runs"])
    status, body = out["off"]  # not asked to record: nothing refused
    assert status == 200 and "record_refused" not in body and not any(r["recorded"] for r in body["runs"])
    recorded = _recorded(rclient, "authrec")
    assert sorted(t.task_id for t in recorded) == ["auth-admin"] * 2 + ["auth-record"] * 2
    assert all(t.ground_truth is not None and t.ground_truth.calls[0].name == "get_weather" for t in recorded)


def test_chat_traffic_is_recorded_only_with_a_record_key(tiny_model_dir, serve_redis, rclient):
    settings = ServeSettings(engine="hf", max_model_len=512, torch_threads=1, record_chat_share=1.0, record_chat_n=1)

    async def scenario(client, app):
        statuses = []
        for key in (None, SERVE_KEY, RECORD_KEY):
            r = await client.post(
                "/v1/chat/completions",
                json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3},
                headers=_auth(key),
            )
            statuses.append(r.status)
        return statuses

    statuses = asyncio.run(
        run_in_app(tiny_model_dir, serve_redis.url, scenario, settings, stream_prefix="authchat", api_keys=KEYS)
    )
    assert statuses == [200, 200, 200]  # serving stays open
    recorded = _recorded(rclient, "authchat")
    assert len(recorded) == 1 and recorded[0].meta["source"] == "chat"


def test_admin_endpoint_needs_an_admin_key(tiny_model_dir, serve_redis):
    async def scenario(client, app):
        out = {}
        for name, key in [
            ("none", None),
            ("wrong", "nope"),
            ("record", RECORD_KEY),
            ("serve", SERVE_KEY),
            ("admin", ADMIN),
        ]:
            r = await client.post("/admin/weights", json={"version": "x"}, headers=_auth(key))
            out[name] = (r.status, (await r.json())["error"]["type"])
        return out

    out = asyncio.run(run_in_app(tiny_model_dir, serve_redis.url, scenario, api_keys=KEYS, admin_token=ADMIN))
    assert out["none"] == (401, "authentication_error") and out["wrong"] == (401, "authentication_error")
    assert out["record"] == (403, "permission_error") and out["serve"] == (403, "permission_error")
    assert out["admin"] == (400, "invalid_request_error")  # authorised; the body is what is wrong


@pytest.mark.parametrize("required", [False, True])
def test_serve_scope_is_enforced_on_model_endpoints_only_when_required(tiny_model_dir, serve_redis, required):
    async def scenario(client, app):
        out = {}
        for name, key in [("none", None), ("wrong", "nope"), ("serve", SERVE_KEY), ("record", RECORD_KEY)]:
            r = await client.get("/v1/models", headers=_auth(key))
            out[name] = r.status
        out["healthz"] = (await client.get("/healthz")).status
        out["openapi"] = (await client.get("/openapi.json")).status
        return out

    out = asyncio.run(run_in_app(tiny_model_dir, serve_redis.url, scenario, api_keys=KEYS, serve_requires_key=required))
    assert out["serve"] == out["record"] == out["healthz"] == out["openapi"] == 200  # record ⊇ serve
    assert (out["none"], out["wrong"]) == ((401, 401) if required else (200, 200))
