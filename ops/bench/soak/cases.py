"""The hostile cases of `slca bench soak` (issue 36): requests that once stalled, bloated or broke the system, sent to
the live system while it serves and trains, each judged held or not.

A case is an action — a function of the `Target` that sends its requests and says what it saw (`Seen`). `run_case`
times a small chat around it: once alone just before, one after another while the action's requests are in flight,
once alone just after. The case holds when its action held and every small chat sent meanwhile was answered (200)
within max(SLOWDOWN × alone, alone + SLACK_S), `alone` the slower of the two alone (the soak's legal load goes on
meanwhile: the margin is for that, not for a caller who holds the others up — six impossible prompts once made a
0.1 s chat take 10 s). A try whose only fault is a late small chat is tried again and the majority of three
decides (`run_case`): the learner's steps and weight swaps come and go, a caller who holds the others up does so at
every try. The control (`quiet`) sends nothing and is judged alike: how often a small chat is late anyway, which a
case's late tries are weighed against (ops/bench/soak/case_report.py). Each round runs the cases in an order turned
by one from the round before, so no case (the control included) always follows the same one. The requests
themselves are built in ops/bench/hostile.py, which the tests send too.
"""

from __future__ import annotations

import http.client
import json
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator
from urllib.parse import urlsplit

from ops.bench.hostile import (
    AGENT,
    CHAT,
    FOREIGN_HOST,
    JSON_HEADERS,
    READ_ONLY_PATHS,
    USER,
    empty_arrays_body,
    forced_call,
    huge_version_path,
    impossible_prompt,
    large_enum_tool,
    nested_repeats_tool,
    post_head,
    unknown_field_body,
)
from ops.bench.soak.case_report import CONTROL, CaseResult

SMALL_CHAT = {"messages": USER, "max_tokens": 4, "seed": 1}
SMALL_CHAT_TIMEOUT_S = 120.0
"""A small chat not answered by then (429s retried after their Retry-After) is not answered."""
SLOWDOWN, SLACK_S = 3.0, 5.0
"""A small chat sent meanwhile may take max(SLOWDOWN × its time alone, its time alone + SLACK_S)."""
LEAD_S = 0.05
"""The action's requests leave this long before the first small chat meanwhile."""
MAX_CHATS = 200
"""Small chats sent during one case at most (a bound on the loop; a case ends long before)."""
REFUSAL_S = 5.0
"""A request refused by a check before any model work (context, unknown field, Host) is refused within this."""
AT_ONCE = 6
"""Impossible prompts sent together (issue 36: six of them held a small chat for 10 s); legal bodies of empty
arrays sent together."""
LEGAL_BODY_S = 120.0
"""A legal body of empty arrays is answered (200, or a 4xx refusal) within this."""
CUT_SLACK_S = 5.0
"""A trickled body is cut (408) within serve.body_read_timeout_s plus this."""
LATE_TRIES = 3
"""Tries of a case whose action held while a small chat was late (`run_case`): it holds when most held."""
RETRY_S = 1.0
"""The small chat is sent again this long after a 429 (the soak's legal clients honour Retry-After; the small chat
is timed, so it waits no longer than a second)."""
TRICKLE_S = 1.0
"""A trickled body sends one byte this often."""
QUIET_S = 10.0
"""The control sends nothing for this long (about a case's length: the impossible prompts and the empty arrays take
a few seconds, the grammars and the trickled body up to 35)."""


@dataclass(frozen=True)
class Target:
    """The live system the cases attack, and the bounds it was configured with."""

    url: str
    """serve's base URL (loopback)."""
    api_key: str | None = None
    """Sent by the small chat and the cases' model requests (when serving needs a key)."""
    body_read_timeout_s: float = 30.0
    grammar_timeout_s: float = 10.0
    """serve.grammar_compile_timeout_s: a forced call waits at most this for a builder, and builds at most this."""
    weights_url: str | None = None
    """The learner's weight server (None: it serves none; the weight case is skipped)."""
    weights_token: str | None = None
    """The fetch token of weights.key (None: no key, no token asked)."""
    learner_log: Path | None = None
    """The learner's log, read for a traceback the weight case may cause (None: not read)."""


@dataclass(frozen=True)
class Seen:
    held: bool
    detail: str


@dataclass(frozen=True)
class Answer:
    status: int | None
    raw: bytes
    seconds: float
    error: str | None = None

    @property
    def code(self) -> str | None:
        """The OpenAI-style error's code (None: not one)."""
        try:
            error = json.loads(self.raw).get("error")
        except (ValueError, AttributeError):
            return None
        return error.get("code") if isinstance(error, dict) else None

    def __str__(self) -> str:
        if self.status is None:
            return f"no answer ({self.error}) after {self.seconds:.2f}s"
        return f"{self.status}{' ' + self.code if self.code else ''} in {self.seconds:.2f}s"


# --- requests ------------------------------------------------------------------------------------
def _split(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or 80


def request(url: str, method: str, path: str, body: bytes | None, headers: dict, timeout_s: float) -> Answer:
    """One request on a connection of its own; a connection error or timeout is an answer without a status."""
    conn = http.client.HTTPConnection(*_split(url), timeout=timeout_s)
    began = time.monotonic()
    try:
        conn.request(method, path, body, headers)
        response = conn.getresponse()
        return Answer(response.status, response.read(), time.monotonic() - began)
    except (OSError, http.client.HTTPException) as exc:
        return Answer(None, b"", time.monotonic() - began, f"{type(exc).__name__}: {exc}"[:200])
    finally:
        conn.close()


def _post(t: Target, path: str, body: bytes, timeout_s: float) -> Answer:
    auth = {"Authorization": f"Bearer {t.api_key}"} if t.api_key else {}
    return request(t.url, "POST", path, body, {**JSON_HEADERS, **auth}, timeout_s)


def small_chat(t: Target) -> Answer:
    """The small chat: a 200 within SMALL_CHAT_TIMEOUT_S, each 429 sent again after RETRY_S (timed whole)."""
    began, data = time.monotonic(), json.dumps(SMALL_CHAT).encode()
    while (left := SMALL_CHAT_TIMEOUT_S - (time.monotonic() - began)) > 0:
        answer = _post(t, CHAT, data, left)
        if answer.status != 429:
            return Answer(answer.status, answer.raw, time.monotonic() - began, answer.error)
        time.sleep(min(RETRY_S, left))
    return Answer(None, b"", time.monotonic() - began, f"only 429s for {SMALL_CHAT_TIMEOUT_S:g}s")


def _together(send: Callable[[], Answer], count: int) -> list[Answer]:
    with ThreadPoolExecutor(count, thread_name_prefix="soak-case-send") as pool:
        return list(pool.map(lambda _: send(), range(count)))


def _judge(answers: list[Answer], statuses: tuple[int, ...], codes: tuple[str, ...], bound_s: float) -> Seen:
    """Held when every answer has one of `statuses` (and, when it is a 4xx and `codes` are given, one of `codes`)
    within `bound_s`."""
    wrong = [
        a
        for a in answers
        if a.status not in statuses or a.seconds > bound_s or (codes and 400 <= a.status < 500 and a.code not in codes)
    ]
    seen = ", ".join(sorted({str(a.status) + (f" {a.code}" if a.code else "") for a in answers}))
    slowest = max(a.seconds for a in answers)
    detail = f"{len(answers)} × {seen}, slowest {slowest:.2f}s (bound {bound_s:g}s)"
    if wrong:
        detail += f"; wrong: {wrong[0]}: {wrong[0].raw[:120].decode(errors='replace')}"
    return Seen(not wrong, detail)


# --- the actions ---------------------------------------------------------------------------------
def impossible_prompts(t: Target) -> Seen:
    """Prompts that can never fit the context, sent together: each refused (400 context_length_exceeded) by its
    characters, before templating, within REFUSAL_S."""
    body = json.dumps(impossible_prompt()).encode()
    answers = _together(lambda: _post(t, CHAT, body, SMALL_CHAT_TIMEOUT_S), AT_ONCE)
    return _judge(answers, (400,), ("context_length_exceeded",), REFUSAL_S)


def costly_grammars(t: Target) -> Seen:
    """Forced calls with a costly grammar — nested repeats, large enums under repeats — one after the other: each
    answered (200) or refused (400 by the schema's bounds, 422 grammar_too_costly, 503 grammar_builder_busy after
    its wait) within a wait for a builder plus a build, each serve.grammar_compile_timeout_s, plus 10 s."""
    bound_s = 2 * t.grammar_timeout_s + 10
    answers = [
        _post(t, CHAT, json.dumps(forced_call(tool)).encode(), bound_s + 60)
        for tool in (nested_repeats_tool(), large_enum_tool())
    ]
    codes = ("invalid_tool_schema", "invalid_request", "grammar_too_costly", "grammar_builder_busy")
    return _judge(answers, (200, 400, 422, 503), codes, bound_s)


def empty_arrays(t: Target) -> Seen:
    """Legal ~1 MB bodies whose ignored field holds a third of a million empty arrays, sent together: answered
    (200) or refused (4xx), never a 5xx, within LEGAL_BODY_S."""
    body = empty_arrays_body()
    answers = _together(lambda: _post(t, CHAT, body, LEGAL_BODY_S + 60), AT_ONCE)
    return _judge(answers, (200, 400, 413, 429), (), LEGAL_BODY_S)


def unknown_fields(t: Target) -> Seen:
    """A 900 KB unknown top-level field, on an agent run and on a chat: refused (400 unknown_field) within
    REFUSAL_S, as OpenAI refuses an unrecognised argument."""
    answers = [_post(t, path, unknown_field_body(path), SMALL_CHAT_TIMEOUT_S) for path in (AGENT, CHAT)]
    return _judge(answers, (400,), ("unknown_field",), REFUSAL_S)


def foreign_host(t: Target) -> Seen:
    """/metrics and /readyz under a foreign Host header (DNS rebinding): 421 host_not_allowed."""
    answers = [request(t.url, "GET", path, None, {"Host": FOREIGN_HOST}, REFUSAL_S * 2) for path in READ_ONLY_PATHS]
    return _judge(answers, (421,), ("host_not_allowed",), REFUSAL_S)


def trickled_body(t: Target) -> Seen:
    """Headers, then a body one byte a second (slowloris): cut with 408 within serve.body_read_timeout_s (plus
    CUT_SLACK_S) of the headers; the small chats sent meanwhile say whether the others were held up."""
    body = json.dumps(SMALL_CHAT).encode() + b" " * 4096  # JSON allows the trailing blanks: never done in time
    bound_s = t.body_read_timeout_s + CUT_SLACK_S
    answer, sent = trickle(t.url, CHAT, body, bound_s + 10)
    held = answer.status == 408 and answer.seconds <= bound_s
    return Seen(held, f"{answer} after {sent} of {len(body)} bytes (cut bound {bound_s:g}s)")


def trickle(url: str, path: str, body: bytes, timeout_s: float) -> tuple[Answer, int]:
    """Send `path`'s headers at once, then `body` a byte every TRICKLE_S until the server answers (or `timeout_s`):
    (its answer, timed from the headers to its first byte; bytes of the body sent). The answer is read up to its
    Content-Length: after a 408 aiohttp keeps the socket open a while (its lingering close) to drain the body."""
    sent, raw, answered_at = 0, b"", None
    with socket.create_connection(_split(url), timeout=timeout_s) as sock:
        sock.sendall(post_head(path, len(body)))
        began = time.monotonic()
        sock.settimeout(TRICKLE_S)
        while time.monotonic() - began < timeout_s and not _whole(raw):
            try:
                if sent < len(body) and not raw:
                    sent += sock.send(body[sent : sent + 1])
                chunk = sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:  # reset once the server cut it: what it answered is already read
                break
            if not chunk:
                break
            answered_at = answered_at or time.monotonic()
            raw += chunk
    return _parsed(raw, (answered_at or time.monotonic()) - began, "no answer"), sent


def _whole(raw: bytes) -> bool:
    """`raw` holds a whole HTTP/1.1 answer: its headers and as many body bytes as its Content-Length says."""
    head, sep, body = raw.partition(b"\r\n\r\n")
    if not sep:
        return False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length" and value.strip().isdigit():
            return len(body) >= int(value)
    return False


def _parsed(raw: bytes, seconds: float, error: str) -> Answer:
    """A raw HTTP/1.1 answer (status line, headers, body)."""
    head, _, body = raw.partition(b"\r\n\r\n")
    try:
        status = int(head.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return Answer(None, b"", seconds, error)
    return Answer(status, body, seconds)


def quiet(t: Target) -> Seen:
    """The control: nothing sent for QUIET_S while the small chats go on — the system's own pace, as the cases' are
    judged (always held: only its small chats are measured)."""
    time.sleep(QUIET_S)
    return Seen(True, f"nothing sent for {QUIET_S:g}s (the control)")


def huge_weight_version(t: Target) -> Seen:
    """The learner's weight server asked for a 5,000-digit version (with a valid token, so the version is read):
    a 4xx within REFUSAL_S and no traceback in the learner's log."""
    offset = log_size(t.learner_log)
    headers = {"Authorization": f"Bearer {t.weights_token}"} if t.weights_token else {}
    answer = request(t.weights_url or "", "GET", huge_version_path(), None, headers, REFUSAL_S * 2)
    time.sleep(0.5)  # the server logs before or just after it answers
    traced = "Traceback" in log_text_since(t.learner_log, offset)
    held = answer.status is not None and 400 <= answer.status < 500 and answer.status != 403
    held = held and answer.seconds <= REFUSAL_S and not traced
    log_seen = "not read" if t.learner_log is None else ("a traceback" if traced else "no traceback")
    refused = " (the token was refused: the version was never read)" if answer.status == 403 else ""
    return Seen(held, f"{answer}{refused}; learner log: {log_seen}")


def log_size(path: Path | None) -> int:
    try:
        return path.stat().st_size if path else 0
    except OSError:
        return 0


def log_text_since(path: Path | None, offset: int) -> str:
    """What `path` gained since it was `offset` bytes long (all of it when it shrank: rotated meanwhile)."""
    if path is None:
        return ""
    try:
        with open(path, "rb") as fh:
            fh.seek(offset if fh.seek(0, 2) >= offset else 0)
            return fh.read().decode(errors="replace")
    except OSError:
        return ""


# --- the cases, and how one is run --------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    name: str
    action: Callable[[Target], Seen]
    skip: Callable[[Target], str | None] = lambda t: None
    """Why the case cannot run against `t` (None: it can)."""


CASES = (
    Case(CONTROL, quiet),
    Case("impossible_prompts", impossible_prompts),
    Case("costly_grammars", costly_grammars),
    Case("empty_arrays", empty_arrays),
    Case("unknown_fields", unknown_fields),
    Case("trickled_body", trickled_body),
    Case("foreign_host", foreign_host),
    Case(
        "huge_weight_version",
        huge_weight_version,
        lambda t: None if t.weights_url else "the learner serves no weights over HTTP (weights.bind unset)",
    ),
)


def allowed_s(alone_s: float) -> float:
    """How long a small chat sent meanwhile may take, given its time alone."""
    return max(SLOWDOWN * alone_s, alone_s + SLACK_S)


def run_case(case: Case, t: Target, t0: float | None = None) -> CaseResult:
    """`case` with the small chat timed around it (module docstring); `t0`: the measured window's start.

    A try whose action held but whose small chat meanwhile was late is tried again, up to `LATE_TRIES` tries in all,
    and the case holds when most of them held: with the learner training, its steps take both cores for tens of
    seconds and a one-engine serve pauses for each weight swap, so one late chat may be the system's own cycle —
    a case that holds the others up does so at every try (the fresh-clone soak with the learner training, 2026-12-05:
    one trickled-body try's small chat took 13.1 s against 2.56 s alone, its other try 3.1 s)."""
    at = None if t0 is None else time.monotonic() - t0
    if (reason := case.skip(t)) is not None:
        return CaseResult(case.name, False, "", 0.0, at, skipped=reason)
    tries = [_one_try(case, t, at)]
    while tries[0].late and len(tries) < LATE_TRIES:
        held = sum(r.held for r in tries)
        if held * 2 > LATE_TRIES or (len(tries) - held) * 2 > LATE_TRIES:
            break  # the majority is decided
        tries.append(_one_try(case, t, at))
    if len(tries) == 1:
        return tries[0]
    held = sum(r.held for r in tries)
    first = tries[0]
    first.held = held * 2 > len(tries)
    first.detail += f"; tried {len(tries)} times (a small chat late): held {held} of {len(tries)}"
    first.seconds = max(r.seconds for r in tries)
    first.chat_alone_s = max(r.chat_alone_s or 0.0 for r in tries)
    first.chat_worst_s = max((r.chat_worst_s for r in tries if r.chat_worst_s is not None), default=None)
    first.tries_run, first.tries_late = len(tries), sum(r.tries_late for r in tries)
    first.late = not first.held and all(r.held or r.late for r in tries)
    return first


def _one_try(case: Case, t: Target, at: float | None) -> CaseResult:
    before = small_chat(t)
    seen, seconds, meanwhile = _with_chats(case.action, t)
    after = small_chat(t)
    alone = [a for a in (before, after) if a.status == 200]
    if len(alone) < 2:
        bad = next(a for a in (before, after) if a.status != 200)
        return CaseResult(case.name, False, f"{seen.detail}; the small chat alone failed: {bad}", seconds, at)
    alone_s = max(a.seconds for a in alone)
    answered = [a.seconds for a in meanwhile if a.status == 200]
    worst = max(answered) if answered else None
    late = [a for a in meanwhile if a.status != 200 or a.seconds > allowed_s(alone_s)]
    chats = f"{len(meanwhile)} small chats meanwhile, worst {worst if worst is None else round(worst, 2)}s"
    chats += f" (alone {alone_s:.2f}s, allowed {allowed_s(alone_s):.2f}s)"
    if late:
        chats += f"; held up: {late[0]}"
    held = seen.held and not late
    late_only = seen.held and bool(late)
    return CaseResult(
        case.name,
        held,
        f"{seen.detail}; {chats}",
        seconds,
        at,
        alone_s,
        worst,
        late=late_only,
        tries_late=int(late_only),
    )


def _with_chats(action: Callable[[Target], Seen], t: Target) -> tuple[Seen, float, list[Answer]]:
    """(what the action saw, its seconds, the small chats sent one after another while it ran: at least one)."""

    def timed() -> tuple[Seen, float]:
        began = time.monotonic()
        try:
            seen = action(t)
        except OSError as exc:  # serve down (refused, reset): the case is not held, and the rounds go on
            seen = Seen(False, f"no answer ({type(exc).__name__}: {exc})")
        return seen, time.monotonic() - began

    with ThreadPoolExecutor(1, thread_name_prefix="soak-case") as pool:
        future = pool.submit(timed)
        time.sleep(LEAD_S)
        chats = [small_chat(t)]
        while not future.done() and len(chats) < MAX_CHATS:
            chats.append(small_chat(t))
        seen, seconds = future.result()
    return seen, seconds, chats


def run_round(t: Target, t0: float | None = None, until: float | None = None, turn: int = 0) -> Iterator[CaseResult]:
    """Every case once, in order turned by `turn` (the round's number), each result as it comes; none started at or
    after `until` (a monotonic time)."""
    k = turn % len(CASES)
    for case in CASES[k:] + CASES[:k]:
        if until is not None and time.monotonic() >= until:
            return
        yield run_case(case, t, t0)
