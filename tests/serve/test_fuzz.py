"""A bounded property-based fuzz of every operation in /openapi.json (schemathesis: valid and invalid bodies)
against a real `slca serve` process on the tiny model: no response ≥ 500, and the server is ready afterwards.

Bounds are set small on this server (tokens, n, turns) so that the valid cases the fuzzer finds stay cheap.
"""

from __future__ import annotations

import json
import urllib.request

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings

from tests.support.serve import ADMIN_TOKEN, ServerProcess

# a `slca serve` process and EXAMPLES_PER_OPERATION requests for each of the seven operations
pytestmark = pytest.mark.slow

EXAMPLES_PER_OPERATION = 30


@pytest.fixture(scope="module")
def fuzz_server(serve_redis, tiny_model_dir, tmp_path_factory):
    server = ServerProcess(
        serve_redis.url,
        tiny_model_dir,
        tmp_path_factory.mktemp("fuzz") / "server.log",
        "weights.follow=false",
        "serve.max_tokens_limit=8",
        "serve.max_n=2",
        "serve.max_turns_limit=2",
        "serve.max_tokens_default=8",
    )
    try:
        yield server.wait_ready()
    finally:
        server.stop()


@pytest.fixture(scope="module")
def api_schema(fuzz_server):
    with urllib.request.urlopen(fuzz_server.url + "/openapi.json", timeout=10) as r:
        doc = json.loads(r.read())
    return schemathesis.openapi.from_dict(doc)


OPERATIONS = [
    ("POST", "/v1/chat/completions"),
    ("POST", "/v1/agent/runs"),
    ("GET", "/v1/models"),
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("GET", "/metrics"),
    ("POST", "/admin/weights"),
]


def test_the_document_lists_every_operation(api_schema):
    listed = {(op.ok().method.upper(), op.ok().path) for op in api_schema.get_all_operations()}
    assert listed == set(OPERATIONS)


@pytest.mark.parametrize("method,path", OPERATIONS)
def test_no_operation_answers_5xx(api_schema, fuzz_server, method, path):
    operation = api_schema[path][method]
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"} if path == "/admin/weights" else None

    @settings(
        max_examples=EXAMPLES_PER_OPERATION, deadline=None, suppress_health_check=list(HealthCheck), database=None
    )
    @given(case=operation.as_strategy())
    def fuzz(case):
        response = case.call(base_url=fuzz_server.url, headers=headers, timeout=60)
        expected_503 = path == "/readyz" and response.status_code == 503
        assert response.status_code < 500 or expected_503, (
            method,
            path,
            case.body,
            response.status_code,
            response.text[:500],
        )
        if response.status_code >= 400 and "json" in response.headers.get("Content-Type", ""):
            error = response.json().get("error")
            assert isinstance(error, dict) and error.get("message"), response.text[:500]

    fuzz()


def test_server_is_ready_after_the_fuzz(fuzz_server):
    assert fuzz_server.get_json("/readyz")["status"] == "ready"
    log = fuzz_server.log_path.read_text()
    assert "Traceback" not in log, log[-3000:]
