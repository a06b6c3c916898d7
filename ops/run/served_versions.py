"""`slca status`'s lines about what each serve process of `slca up` serves now, from its own `GET /v1/versions`
(docs/design.md#versions): the version callers get — what the engines hold, not the promotion record, which with one
engine per process (vLLM, role "both") callers do not follow — and, with `ops.candidate_replica`, serve-candidate's
version beside it."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

SERVE_PROCESSES = ("serve", "serve-candidate")
"""The serve processes of `slca up` (`ops/run/supervisor/plan.py`), in the order their lines are printed."""


def read_versions(url: str, timeout_s: float = 1.0) -> dict[str, Any] | None:
    """A serve process's `/v1/versions`, or None when it does not answer (short timeout: never hang a CLI)."""
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/v1/versions", timeout=timeout_s) as resp:
            body = json.loads(resp.read())
    except (urllib.error.URLError, OSError, ValueError):
        return None
    return body if isinstance(body, dict) else None


def callers_version(body: dict[str, Any]) -> int | None:
    """The version a caller's request (no key, no pin) gets from this replica: its promoted engine where it holds one,
    else its one engine (the candidate's: callers share it while the roles are the same version, and follow it with
    one engine per process); a candidate replica's one engine; a server without version roles: its one version."""
    engines = body.get("engines")
    if not isinstance(engines, dict):
        return body.get("promoted")
    if body.get("role") == "candidate":
        return engines.get("candidate")
    return engines.get("promoted", engines.get("candidate"))


def _v(version: Any) -> str:
    return "-" if version is None else f"v{version}"


def served_lines(served: list[tuple[str, str, dict[str, Any] | None]]) -> str:
    """One line per serve process — (name, base URL, its `/v1/versions` or None) — saying what callers get there."""
    lines = []
    for name, url, body in served:
        if body is None:
            lines.append(f"{name}: /v1/versions did not answer ({url})")
            continue
        role = body.get("role", "both")
        engines = body.get("engines") if isinstance(body.get("engines"), dict) else {}
        candidate = engines.get("candidate", body.get("candidate"))
        hold = body.get("hold") if isinstance(body.get("hold"), dict) else None
        held = ""
        if hold:
            held = f"; held at {_v(hold.get('version'))} while the gate judges it ({hold.get('left_s')} s left at most)"
        if role == "candidate":
            lines.append(
                f"{name} [candidate]: serves the candidate {_v(candidate)} to every request: the feed, the probe, "
                f"the gate's candidate runs{held} ({url})"
            )
            continue
        callers, promoted = callers_version(body), body.get("promoted")
        notes = []
        if role == "both" and body.get("follow_candidate"):
            notes.append("serve.follow_candidate: callers follow the candidate")
        elif role == "both" and body.get("one_engine"):
            notes.append("one engine per process: callers follow the candidate")
        if promoted is not None and promoted != callers:
            notes.append(f"the record's promoted v{promoted} is not what callers get")
        if role == "both":
            share = body.get("canary_share") or 0
            if share > 0 and candidate != callers:
                notes.append(f"{share:.0%} of callers get the candidate {_v(candidate)}")
            if candidate != callers:
                notes.append(f"the feed and the probe get the candidate {_v(candidate)}")
        tag = f" [{role}]" if role != "both" else ""
        lines.append(f"{name}{tag}: callers get {_v(callers)}" + "".join(f"; {n}" for n in notes) + f"{held} ({url})")
    return "\n".join(lines)
