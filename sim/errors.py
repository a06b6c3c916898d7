"""What kind of error a tool result is, read from its status: the same reading for real tools and for SGLS.

400 invalid arguments (the schema's types and required fields, a documented format or set of values), 404 an
unknown id, 409 a call the domain's rules refuse in the current state (an order that is no longer pending, a second
return). Injected faults (429, 5xx) and anything else are `other`.
"""

from __future__ import annotations

from slca.contracts import ToolResult

INVALID = "invalid_arguments"
NOT_FOUND = "not_found"
RULE = "rule"
OTHER = "other"

STATUS_OF = {INVALID: 400, NOT_FOUND: 404, RULE: 409}
KIND_OF = {status: kind for kind, status in STATUS_OF.items()}


def error_kind(result: ToolResult) -> str | None:
    """None for a success, else one of `invalid_arguments`, `not_found`, `rule`, `other`."""
    if result.ok:
        return None
    return KIND_OF.get(result.status, OTHER)
