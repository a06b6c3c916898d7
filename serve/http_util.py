"""Request parsing shared by the handlers: a size-, depth- and number-checked JSON body, the model name check,
and `off_loop` for the CPU-heavy work of a request (parsing, schema checks, templating, tokenisation).

A body is refused before `json.loads` builds anything when it nests deeper than `max_json_depth` (a pre-scan of
the bytes: 100k nested lists would otherwise raise RecursionError deep inside the decoder), and after parsing
when a number is longer than `max_number_chars` (a 5,000-digit integer trips Python's int-str conversion limit;
`int()` of a long string is quadratic), is NaN/Infinity or overflows to infinity, or a string holds a lone UTF-16
surrogate (`"\\ud800"`: the tokenizer and every encoder downstream reject it). Each error names the field.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import json
import math
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import accumulate
from typing import Any, AsyncIterator, Callable, TypeVar

from aiohttp import web

from serve.errors import InvalidJSON, ModelNotFound, PayloadTooLarge, RequestTimeout, UnsafeJSON, UnsupportedMediaType
from serve.keys import ENGINE, REQUEST_POOL, SETTINGS

T = TypeVar("T")


async def off_loop(app: web.Application, fn: Callable[..., T], *args: Any) -> T:
    """Run `fn(*args)` in the app's request pool: the event loop keeps answering (/healthz) meanwhile."""
    # in the request's context (its version route: serve/versions.py), as asyncio.to_thread does
    call = functools.partial(contextvars.copy_context().run, fn, *args)
    return await asyncio.get_running_loop().run_in_executor(app[REQUEST_POOL], call)


def request_pool(threads: int) -> ThreadPoolExecutor:
    """The small pool of an app for the CPU work of its requests (owned by the app's cleanup context,
    `request_pool_ctx`). Small on purpose: that work is mostly Python, so more threads add no throughput (the GIL)
    but each one is another thread the event loop waits behind for the GIL — with a dozen busy threads /healthz
    took over 100 ms. Requests beyond it queue, off the loop."""
    return ThreadPoolExecutor(threads, thread_name_prefix="request-cpu")


async def request_pool_ctx(app: web.Application) -> AsyncIterator[None]:
    """The request pool for the app's lifetime; on exit, queued work is cancelled and running work finishes."""
    pool = app[REQUEST_POOL] = request_pool(app[SETTINGS].request_threads)
    yield
    await asyncio.to_thread(pool.shutdown, wait=True, cancel_futures=True)


@dataclass(frozen=True)
class JSONLimits:
    max_depth: int = 64
    """Deepest nesting of arrays/objects (the body object itself is depth 1)."""
    max_number_chars: int = 100
    """Longest number literal (digits, sign, fraction, exponent)."""

    @classmethod
    def of(cls, settings) -> "JSONLimits":
        return cls(settings.max_json_depth, settings.max_number_chars)


async def read_json(request: web.Request) -> Any:
    settings = request.app[SETTINGS]
    if request.content_type != "application/json":
        # A page in a browser can POST `text/plain` anywhere without a CORS preflight; `application/json` needs
        # one, which this server never grants: requiring it keeps web pages from driving a local API.
        raise UnsupportedMediaType(f"Content-Type must be application/json, not {request.content_type[:100]!r}")
    raw = await _read_body(request, settings.max_body_bytes, settings.body_read_timeout_s)
    return await off_loop(request.app, loads_checked, raw, JSONLimits.of(settings))


async def _read_body(request: web.Request, limit: int, timeout_s: float) -> bytes:
    if request.content_length is not None and request.content_length > limit:
        raise PayloadTooLarge(f"request body of {request.content_length} bytes exceeds the limit of {limit}")
    try:
        async with asyncio.timeout(timeout_s):
            raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise PayloadTooLarge(f"request body exceeds the limit of {limit} bytes") from None
    except TimeoutError:
        raise RequestTimeout(f"the request body did not arrive within {timeout_s:g} s") from None
    if len(raw) > limit:
        raise PayloadTooLarge(f"request body of {len(raw)} bytes exceeds the limit of {limit}")
    return raw


def loads_checked(raw: bytes, limits: JSONLimits) -> Any:
    """`json.loads` within `limits`: InvalidJSON when malformed, UnsafeJSON (param: the field) when refused."""
    _check_depth(raw, limits.max_depth)
    try:
        text = raw.decode("utf-8")  # strict: json.loads(bytes) would let encoded surrogates through
        value = json.loads(
            text,
            parse_int=functools.partial(_int, limits.max_number_chars),
            parse_float=functools.partial(_float, limits.max_number_chars),
            parse_constant=_constant,
        )
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidJSON(f"request body is not valid JSON: {exc}") from None
    except RecursionError:  # unreachable after _check_depth unless max_depth is set near Python's recursion limit
        raise UnsafeJSON("JSON nests too deeply") from None
    found = _first_refused(value)
    if found is not None:
        path, reason = found
        param = ".".join(str(p) for p in path) or None
        raise UnsafeJSON(f"{param or 'body'}: {reason}", param=param)
    return value


# --- nesting, before parsing ---------------------------------------------------------------------
# Linear in the body, whatever it holds. Escape pairs go first (`\\.`: inside a string they are one character;
# outside one they are invalid JSON, which `json.loads` refuses before it nests past them), leaving strings without
# escapes: a quote to the next quote or, unterminated, to the end. The old single pattern for an escaped string
# failed on an unterminated one and restarted at every later quote, each restart reading to the end again —
# quadratic on a run of escaped quotes (`[`×65 `"` `\\"`×N: 60 KB took 10 s, 1 MiB an hour, the GIL held).
_ESCAPE = re.compile(rb"\\.", re.DOTALL)
_STRING = re.compile(rb'"[^"]*(?:"|\Z)')
_NOT_BRACKET = re.compile(rb"[^\[\]{}]+")
_STEP = {0x5B: 1, 0x7B: 1, 0x5D: -1, 0x7D: -1}  # [ { ] }
_TOKEN = re.compile(rb'"([^"]*)(?:"(\s*:)?|\Z)|[\[\]{}]')


def _check_depth(raw: bytes, max_depth: int) -> None:
    if raw.count(b"[") + raw.count(b"{") <= max_depth:
        return  # too few brackets to nest that deep: the common case costs two counts
    unescaped = _ESCAPE.sub(b"", raw)
    brackets = _NOT_BRACKET.sub(b"", _STRING.sub(b"", unescaped))
    if max(accumulate(map(_STEP.__getitem__, brackets)), default=0) > max_depth:  # linear, in C
        field = _deep_field(unescaped, max_depth)
        raise UnsafeJSON(f"{field or 'body'}: JSON nests deeper than {max_depth} levels", param=field)


def _deep_field(unescaped: bytes, max_depth: int) -> str | None:
    """The top-level key under which the nesting first passes `max_depth` (the error path only; the key as
    written, its escapes dropped)."""
    depth, key = 0, None
    for m in _TOKEN.finditer(unescaped):
        if m.group(1) is not None:  # a string; a key when a colon follows
            if m.group(2) and depth == 1:
                key = m.group(1)
            continue
        depth += _STEP[m.group(0)[0]]
        if depth > max_depth:
            break
    if key is None:
        return None
    try:
        return key.decode("utf-8")
    except UnicodeDecodeError:
        return None


# --- numbers and strings, while and after parsing ------------------------------------------------
class _Refused:
    """Stands in for a refused number while parsing, so that the walk afterwards can name its field."""

    def __init__(self, reason: str):
        self.reason = reason


def _int(max_chars: int, s: str) -> int | _Refused:
    if len(s) > max_chars:
        return _Refused(f"integer of {len(s)} characters exceeds the limit of {max_chars}")
    return int(s)


def _float(max_chars: int, s: str) -> float | _Refused:
    if len(s) > max_chars:
        return _Refused(f"number of {len(s)} characters exceeds the limit of {max_chars}")
    value = float(s)
    return value if math.isfinite(value) else _Refused(f"number {s} overflows a double")


def _constant(s: str) -> _Refused:
    return _Refused(f"{s} is not a JSON number")


_SURROGATE = re.compile("[\ud800-\udfff]")  # paired surrogates were already joined by the decoder


def _first_refused(value: Any) -> tuple[tuple, str] | None:
    """(path, reason) of a refused number or a string with a lone surrogate. Iterative (the depth is bounded, the
    breadth is not); only containers are stacked, so that a list of 100k numbers adds no garbage to collect."""
    if not isinstance(value, (dict, list)):
        reason = _scalar_refused(value)
        return ((), reason) if reason else None
    stack: list[tuple[Any, tuple]] = [(value, ())]
    while stack:
        node, path = stack.pop()
        for key, item in node.items() if isinstance(node, dict) else enumerate(node):
            if isinstance(key, str) and not key.isascii() and _SURROGATE.search(key):
                return path + (key,), "key holds a lone UTF-16 surrogate"
            if isinstance(item, (dict, list)):
                stack.append((item, path + (key,)))
            elif reason := _scalar_refused(item):
                return path + (key,), reason
    return None


def _scalar_refused(item: Any) -> str | None:
    if isinstance(item, _Refused):
        return item.reason
    if isinstance(item, str) and not item.isascii() and _SURROGATE.search(item):
        return "string holds a lone UTF-16 surrogate"
    return None


def check_model(app: web.Application, model: str | None) -> str:
    from serve.versions import model_pin  # `<name>@v<N>` pins a version (serve/versions.py)

    served = app[ENGINE].model_name
    model = model_pin(app, model)
    if model is not None and model != served:
        raise ModelNotFound(f"The model {model!r} does not exist; this server serves {served!r}", param="model")
    return served


async def json_response(app: web.Application, body: Any) -> web.Response:
    """`web.json_response(body)` with the body serialised in the request pool: an answer with many logprobs or
    trajectories is megabytes of JSON, seconds of the event loop's time otherwise."""
    return web.Response(body=await off_loop(app, _json_bytes, body), content_type="application/json")


def _json_bytes(body: Any) -> bytes:
    return json.dumps(body).encode()


def sse(data: Any) -> bytes:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n".encode()
