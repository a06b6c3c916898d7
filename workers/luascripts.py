"""Lua scripts run in pipelines without redis-py's per-pipeline SCRIPT EXISTS round trip.

redis-py checks every script of a pipeline with SCRIPT EXISTS before executing it: one extra round trip per
batch. We send EVALSHA directly; a script the server does not know (a restarted Redis starts with an empty
script cache) fails with NOSCRIPT *without running*, so exactly those calls are loaded and re-sent.
"""

from __future__ import annotations

import hashlib

import redis
from redis.exceptions import NoScriptError


class LuaScript:
    def __init__(self, source: str):
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()


class ScriptBatch:
    """Collects (script, keys, args) calls and runs them in one pipeline, in order."""

    def __init__(self, client: redis.Redis):
        self.client = client
        self.calls: list[tuple[LuaScript, list, list]] = []

    def add(self, script: LuaScript, keys: list, args: list) -> None:
        self.calls.append((script, keys, args))

    def execute(self) -> list:
        results = self._run(self.calls)
        missing = [i for i, r in enumerate(results) if isinstance(r, NoScriptError)]
        if missing:
            for script in {self.calls[i][0].sha: self.calls[i][0] for i in missing}.values():
                self.client.script_load(script.source)
            for i, r in zip(missing, self._run([self.calls[i] for i in missing])):
                results[i] = r
        for r in results:
            if isinstance(r, Exception):
                raise r
        return results

    def _run(self, calls) -> list:
        if not calls:
            return []
        pipe = self.client.pipeline(transaction=False)
        for script, keys, args in calls:
            pipe.evalsha(script.sha, len(keys), *keys, *args)
        return pipe.execute(raise_on_error=False)
