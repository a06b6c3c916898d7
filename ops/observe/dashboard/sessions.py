"""Dashboard sign-in: a key sent once in an `Authorization` header buys a session cookie, so that no key ever sits
in a URL (URLs end up in access logs, browser history and shell history).

The cookie holds a random session id, not the key; it is HttpOnly (no script reads it), SameSite=Strict (no other
site's page sends it) and scoped to the dashboard's own path. Sessions live in this process only, at most
`MAX_SESSIONS` (the oldest dropped first) for `SESSION_S` each: a restart signs everyone out.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict

COOKIE = "slca_dashboard"
SESSION_S = 12 * 3600
MAX_SESSIONS = 256


class Sessions:
    def __init__(self, max_sessions: int = MAX_SESSIONS, lifetime_s: float = SESSION_S):
        self.max_sessions, self.lifetime_s = max_sessions, lifetime_s
        self._expiry: OrderedDict[str, float] = OrderedDict()

    def open(self) -> str:
        session = secrets.token_urlsafe(32)
        self._expiry[session] = time.monotonic() + self.lifetime_s
        while len(self._expiry) > self.max_sessions:
            self._expiry.popitem(last=False)
        return session

    def valid(self, session: str | None) -> bool:
        expiry = self._expiry.get(session or "")
        if expiry is None:
            return False
        if expiry < time.monotonic():
            del self._expiry[session]
            return False
        return True

    def close(self, session: str | None) -> None:
        self._expiry.pop(session or "", None)
