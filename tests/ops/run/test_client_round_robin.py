"""README "More than one machine": the client-side round robin snippet, run as written against two stand-in replicas
(local HTTP servers): requests alternate between them, and with one down every request is answered by the other."""

from __future__ import annotations

import re

from tests.ops.run.test_nginx_replicas import Replica
from tests.support.processes import REPO


def readme_snippet(urls: list[str]) -> str:
    text = (REPO / "README.md").read_text()
    block = re.search(r"^  ```python\n(  import itertools\n.*?)^  ```$", text, re.S | re.M)
    assert block, "the round-robin snippet in README's 'More than one machine'"
    code = "\n".join(line[2:] for line in block.group(1).splitlines())
    written = re.findall(r'"(http://[^"]+/v1)"', code)
    assert len(written) == len(urls)
    for old, new in zip(written, urls):
        code = code.replace(old, new)
    return code


def test_the_readme_round_robin_alternates_and_skips_a_replica_that_is_down():
    replicas = [Replica("serve-1"), Replica("serve-2")]
    scope: dict = {}
    exec(readme_snippet([f"http://127.0.0.1:{r.port}/v1" for r in replicas]), scope)  # noqa: S102 — our own README

    def ask() -> str:
        return scope["chat"](model="m", messages=[{"role": "user", "content": "hi"}]).model_extra["replica"]

    try:
        assert [ask() for _ in range(4)] == ["serve-1", "serve-2", "serve-1", "serve-2"]
        replicas[0].stop()
        assert [ask() for _ in range(4)] == ["serve-2"] * 4
    finally:
        replicas[1].stop()
