"""One JSON-schema registry for serve and sim (slca/schema_registry.py): nothing is ever fetched, the metaschemas
are known, and both components build their validators with this very registry."""

from __future__ import annotations

import pytest
from referencing.exceptions import Unresolvable

from slca.schema_registry import SAFE_REGISTRY

META = "https://json-schema.org/draft/2020-12/schema"


@pytest.mark.parametrize("uri", ["http://127.0.0.1:1/evil.json", "file:///etc/passwd", "urn:example:nothing"])
def test_no_reference_is_ever_retrieved(uri):
    with pytest.raises(Unresolvable):
        SAFE_REGISTRY.resolver().lookup(uri)


def test_the_metaschemas_are_known():
    assert SAFE_REGISTRY.resolver().lookup(META).contents["$id"] == META


def test_serve_and_sim_share_the_registry():
    import serve.requests
    import sim.schemas

    assert serve.requests.SAFE_REGISTRY is SAFE_REGISTRY and sim.schemas.SAFE_REGISTRY is SAFE_REGISTRY
    assert serve.requests.schema_validator({"type": "object"})._registry is not None
    # a tool that refers to a metaschema is usable on both sides alike (sim used to refuse what serve accepted)
    assert sim.schemas.schema_problem('{"$ref":"' + META + '"}') is None


def test_sim_still_refuses_a_remote_reference():
    import sim.schemas

    assert "cannot be resolved" in sim.schemas.schema_problem('{"$ref":"http://127.0.0.1:1/x.json"}')
