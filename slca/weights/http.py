"""The HTTP transport: weight versions reach servers on other hosts without a shared filesystem.

The learner's side: `connect()` starts a small HTTP server (stdlib, a thread of the learner) on `weights.bind`
that serves `GET /v<N>/<name>`: only `manifest.json` and the files that version's manifest lists, nothing else of
its directory or of the machine. Each version is announced with `url` (in its signed manifest): `weights.url`,
or `http://<weights.bind>` when that names a host. With `weights.key` set, a request must carry a token
derived from it (`fetch_token`: HMAC of a fixed label, so the key itself never crosses the network); without a key
the files are served to whoever can reach the address.

A server's side: `fetch(manifest)` downloads each listed file of the announced (signature-checked) manifest from its
`url` into a local copy (`weights.mirror_dir`), hashing while it streams; a file whose digest differs, a
response larger than it announced or past `weights.fetch_max_bytes` in all refuses the version (nothing is
kept). The copy is then loaded like any version on disk — its bytes hashed again against the announced manifest as
they are parsed (`WeightVersion.state_dict`) — and copies of versions no longer served are removed (`retain`).
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import io
import logging
import re
import shutil
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from slca.atomic import commit_dir, remove_stale_temps, temp_dir_next_to
from slca.contracts import ContractError, WeightManifest, dump_json
from slca.contracts.weights import MANIFEST_NAME, inside, is_confined_name
from slca.redaction import redact_url
from slca.weights.disk import TransportStats
from slca.weights.errors import FetchError, WeightLoadError
from slca.weights.fetch_report import FetchFailure, FetchObserver, FetchReport
from slca.weights.verify import WeightVersion, manifest_mismatch, open_weight_dir

log = logging.getLogger(__name__)

_PATH = re.compile(r"^/v(\d+)/(.+)$")
_VERSION_DIR = re.compile(r"^v(\d+)$")
_CHUNK = 1 << 20
_WILDCARDS = {"", "0.0.0.0", "::", "[::]"}
MAX_VERSION_DIGITS = 18
"""A version number in a fetch path has at most this many digits (< 2**63): a longer one is a 400, never parsed."""
SERVE_THREADS = 8
"""Fetches the learner's weight server answers at once; a connection past them gets 503 + Retry-After."""
SERVE_TIMEOUT_S = 60.0
"""A client of the weight server that sends or reads nothing for this long is dropped (its thread freed)."""


MAX_MANIFEST_BYTES = 1 << 20
"""A manifest fetched by version number (`HttpTransport.fetch_manifest`) larger than this is refused."""


def version_url(base_url: str, version: int) -> str:
    """Where the learner's weight server at `base_url` serves version `version`'s files (`<that><file name>`)."""
    return f"{base_url.rstrip('/')}/v{version}/"


def fetch_token(key: str) -> str:
    """The bearer token of a weight fetch under `weights.key` (both sides derive it; the key stays home)."""
    return hmac.new(key.encode(), b"slca weight fetch", hashlib.sha256).hexdigest()


def split_bind(bind: str) -> tuple[str, int]:
    """`host:port` (`[v6]:port` too) → (host, port); ValueError says what is wrong."""
    host, sep, port = bind.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"weights bind address {bind!r} is not host:port")
    return host.strip("[]"), int(port)


class HttpTransport:
    """Versions served by the learner over HTTP, fetched by servers into a local, verified copy."""

    name = "http"

    def __init__(
        self,
        weights_dir: Path | None = None,
        *,
        bind: str | None = None,
        url: str | None = None,
        mirror_dir: Path | None = None,
        key: str | None = None,
        timeout_s: float = 60.0,
        max_bytes: int = 64 << 30,
        observer: FetchObserver | None = None,
        serve_threads: int = SERVE_THREADS,
        serve_timeout_s: float = SERVE_TIMEOUT_S,
    ) -> None:
        self.weights_dir = None if weights_dir is None else Path(weights_dir)
        """The learner's published versions (the learner's side)."""
        self.bind, self.url = bind, url
        self.mirror_dir = None if mirror_dir is None else Path(mirror_dir)
        """Where a server keeps its local copies (a server's side)."""
        self.key = key
        self.timeout_s, self.max_bytes = timeout_s, max_bytes
        self.stats = TransportStats()
        self.observer = observer
        """Handed a `FetchReport` after every fetch, failed or not (serve: its `slca_weights_fetch_*` metrics)."""
        self.serve_threads, self.serve_timeout_s = serve_threads, serve_timeout_s
        """The learner's server: fetches answered at once, and how long a silent client is kept."""
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- the learner's side -----------------------------------------------------------------------
    def connect(self) -> None:
        """Start serving `weights_dir` on `bind` (a thread of this process); the announced base URL is then known."""
        if self._server is not None:
            return
        if self.weights_dir is None or not self.bind:
            raise ValueError("the HTTP weight transport needs the weights directory and a bind address")
        host, port = split_bind(self.bind)
        if host in _WILDCARDS and not self.url:
            raise ValueError(
                f"weights bind address {self.bind!r} listens on every interface: set the URL servers fetch from "
                "(weights.url)"
            )
        handler = _handler(self.weights_dir, self.key, self.serve_timeout_s)
        self._server = _BoundedServer((host, port), handler, self.serve_threads)
        self._thread = threading.Thread(target=self._server.serve_forever, name="weights-http", daemon=True)
        self._thread.start()
        log.info("serving published weights at %s (from %s)", self.base_url, self.weights_dir)

    @property
    def base_url(self) -> str:
        if self.url:
            return self.url.rstrip("/")
        if self._server is None:
            raise RuntimeError("the HTTP weight transport is not connected")
        host, port = self._server.server_address[:2]
        return f"http://{f'[{host}]' if ':' in host else host}:{port}"

    def url_for(self, version: int) -> str:
        """Where servers fetch version `version` from (`<url><file name>`), announced in its signed manifest."""
        return version_url(self.base_url, version)

    def close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()

    # --- a server's side ----------------------------------------------------------------------------
    def can_fetch(self, manifest: WeightManifest) -> bool:
        return bool(manifest.url)

    def fetch(self, manifest: WeightManifest) -> WeightVersion:
        """A local copy of the announced version, every file hashed against the announced manifest while it is
        downloaded; WeightLoadError says why not (nothing of a refused version is kept)."""
        t0, progress = time.perf_counter(), _Progress()
        try:
            weights = self._fetch(manifest, progress)
        except Exception as exc:
            self.stats.failures += 1
            self._report(manifest, progress, t0, _failure_of(exc))
            raise
        self.stats.fetches += 1
        self.stats.bytes += progress.bytes
        self.stats.seconds += time.perf_counter() - t0
        self._report(manifest, progress, t0, None)
        return weights

    def fetch_manifest(self, base_url: str, version: int) -> WeightManifest:
        """Version `version`'s manifest as the learner's weight server holds it (`<base_url>/v<N>/manifest.json`),
        for a server that knows a version by number only (a promotion, a pin: `transports.fetch_by_number`).
        Not verified here: its signature is checked before `fetch` downloads what it lists. FetchError says why
        not (the same bounds and token as `fetch`)."""
        source = version_url(base_url, version) + MANIFEST_NAME
        if urllib.parse.urlsplit(source).scheme not in ("http", "https"):
            raise FetchError(f"v{version}: no http(s) url to fetch it from ({redact_url(base_url)!r})", "no_url")
        body = io.BytesIO()
        self._copy(version, source, self._headers(), body, _Progress(), min(self.max_bytes, MAX_MANIFEST_BYTES))
        try:
            return WeightManifest.model_validate_json(body.getvalue())
        except (ContractError, ValueError) as exc:
            raise FetchError(f"{source}: not a weight manifest ({str(exc)[:200]})", "bad_response") from None

    def _headers(self) -> dict:
        return {"Authorization": f"Bearer {fetch_token(self.key)}"} if self.key else {}

    def _report(self, manifest: WeightManifest, progress: "_Progress", t0: float, failure: FetchFailure | None):
        if self.observer is not None:
            seconds = time.perf_counter() - t0
            self.observer(FetchReport(manifest.version, progress.bytes, seconds, progress.downloaded, failure))

    def _fetch(self, manifest: WeightManifest, progress: "_Progress") -> WeightVersion:
        if self.mirror_dir is None:
            raise FetchError("no local directory to fetch weights into (weights.mirror_dir)", "io")
        url = manifest.url
        if not url or urllib.parse.urlsplit(url).scheme not in ("http", "https"):
            raise FetchError(f"v{manifest.version}: no http(s) url to fetch it from ({url!r})", "no_url")
        target = self.mirror_dir / f"v{manifest.version}"
        if not _holds(target, manifest):  # else fetched before: its bytes are checked again as they are loaded
            progress.downloaded = True
            remove_stale_temps(self.mirror_dir)
            tmp = temp_dir_next_to(target)
            try:
                self._download(manifest, url, tmp, progress)
                (tmp / MANIFEST_NAME).write_text(dump_json(manifest))  # the announced one, signature and all
                shutil.rmtree(target, ignore_errors=True)
                commit_dir(tmp, target)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        open_weight_dir(str(target), manifest)
        return WeightVersion(str(target), manifest.version, manifest)

    def _download(self, manifest: WeightManifest, url: str, into: Path, progress: "_Progress") -> None:
        headers = self._headers()
        for name, digest in sorted(manifest.sha256.items()):
            source = url + urllib.parse.quote(name)
            dest = into / name
            try:
                dest.parent.mkdir(parents=True, exist_ok=True)
                out = open(dest, "wb")
            except OSError as exc:
                raise FetchError(f"{dest}: cannot write the local copy ({exc})", "io") from None
            with out:
                digest_sent = self._copy(manifest.version, source, headers, out, progress, self.max_bytes)
            if digest_sent != digest:
                raise FetchError(f"{source}: checksum mismatch for {name}; v{manifest.version} refused", "checksum")

    def _copy(self, version: int, source: str, headers: dict, out, progress: "_Progress", max_bytes: int) -> str:
        """Stream `source` into `out`, bounded by `max_bytes` over the whole version (`progress.bytes` counts what
        came before); the sha256 of what came."""
        h = hashlib.sha256()
        too_large = f"{source}: v{version} is larger than {max_bytes} bytes"
        try:
            with _OPENER.open(urllib.request.Request(source, headers=headers), timeout=self.timeout_s) as r:
                declared = r.headers.get("Content-Length")
                if declared is not None and progress.bytes + int(declared) > max_bytes:
                    raise FetchError(too_large, "too_large")
                while block := r.read(_CHUNK):
                    progress.bytes += len(block)
                    if progress.bytes > max_bytes:
                        raise FetchError(too_large, "too_large")
                    h.update(block)
                    try:
                        out.write(block)
                    except OSError as exc:
                        raise FetchError(f"{source}: cannot write the local copy ({exc})", "io") from None
        except FetchError:
            raise
        except urllib.error.HTTPError as exc:  # before URLError: it is one
            raise FetchError(f"{source}: cannot fetch ({exc})", "http_status") from None
        except urllib.error.URLError as exc:
            reason = "timeout" if isinstance(exc.reason, TimeoutError) else "unreachable"
            raise FetchError(f"{source}: cannot fetch ({exc})", reason) from None
        except TimeoutError as exc:
            raise FetchError(f"{source}: cannot fetch ({exc or 'timed out'})", "timeout") from None
        except OSError as exc:  # the connection reset or refused mid-way
            raise FetchError(f"{source}: cannot fetch ({exc})", "unreachable") from None
        except (ValueError, http.client.HTTPException) as exc:  # a malformed Content-Length, a truncated body
            raise FetchError(f"{source}: cannot fetch ({exc!r})", "bad_response") from None
        return h.hexdigest()

    def retain(self, versions: set[int]) -> None:
        """Remove the local copies of every version but `versions` (what is served: what a rollback or a rebuild
        loads back)."""
        if self.mirror_dir is None or not self.mirror_dir.is_dir():
            return
        for p in self.mirror_dir.iterdir():
            m = _VERSION_DIR.match(p.name)
            if m and int(m.group(1)) not in versions:
                shutil.rmtree(p, ignore_errors=True)


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A fetch reads the announced (signed) url and nothing else: a redirect is refused, so the token never goes
    to another host."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        where = redact_url(str(newurl))[:200]
        raise urllib.error.HTTPError(req.full_url, code, f"redirect to {where} refused", headers, fp)


_OPENER = urllib.request.build_opener(_NoRedirects)


class _Progress:
    """What one fetch has done so far (kept when it fails midway: its bytes still crossed the network)."""

    def __init__(self) -> None:
        self.bytes = 0
        self.downloaded = False


def _failure_of(exc: BaseException) -> FetchFailure:
    if isinstance(exc, FetchError):
        return exc.reason  # type: ignore[return-value]
    if isinstance(exc, WeightLoadError):  # open_weight_dir: the copy does not match the manifest's structure
        return "invalid_copy"
    return "io"  # the mirror directory: committing or removing the copy failed


def _holds(copy: Path, manifest: WeightManifest) -> bool:
    """A local copy of exactly this announcement is there already (a retried or repeated swap fetches nothing)."""
    try:
        return not manifest_mismatch(WeightManifest.model_validate_json((copy / MANIFEST_NAME).read_text()), manifest)
    except (OSError, ContractError, ValueError):
        return False


class _BoundedServer(ThreadingHTTPServer):
    """ThreadingHTTPServer with at most `threads` connections served at once: a connection past them is answered
    503 + Retry-After from the accepting thread and closed (a burst of clients never makes a thread each)."""

    daemon_threads = True
    BUSY = b"HTTP/1.0 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], threads: int) -> None:
        self._slots = threading.BoundedSemaphore(threads)
        super().__init__(address, handler)

    def process_request(self, request, client_address) -> None:
        if not self._slots.acquire(blocking=False):
            self._refuse(request)
            return
        try:
            super().process_request(request, client_address)  # starts the thread, which frees the slot
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request, client_address) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request, client_address) -> None:
        """One line for a connection that failed (a client that reset it, a malformed request): no traceback on
        stderr for what a client can cause."""
        exc = sys.exc_info()[1]
        log.warning("weights http: %s from %s: %s", type(exc).__name__, client_address[0], str(exc)[:200])

    def _refuse(self, request) -> None:
        try:
            request.settimeout(1.0)
            request.sendall(self.BUSY)
        except OSError:
            pass
        self.shutdown_request(request)


def _handler(weights_dir: Path, key: str | None, timeout_s: float = SERVE_TIMEOUT_S) -> type[BaseHTTPRequestHandler]:
    token = fetch_token(key) if key else None

    class WeightFiles(BaseHTTPRequestHandler):
        server_version = "slca-weights"
        timeout = timeout_s  # socket timeout of every connection: a silent client frees its thread

        def do_GET(self) -> None:  # noqa: N802 — the name http.server calls
            if token is not None:
                sent = self.headers.get("Authorization", "")
                if not hmac.compare_digest(sent.encode(), f"Bearer {token}".encode()):
                    self.send_error(HTTPStatus.FORBIDDEN, "a weight fetch needs the token of weights.key")
                    return
            path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
            m = _PATH.match(path)
            if m and len(m.group(1)) > MAX_VERSION_DIGITS:
                self.send_error(HTTPStatus.BAD_REQUEST, f"a version number has at most {MAX_VERSION_DIGITS} digits")
                return
            file = self._listed_file(m)
            if file is None:
                self.send_error(HTTPStatus.NOT_FOUND)
                return
            try:
                with open(file, "rb") as fh:
                    size = file.stat().st_size
                    self.send_response(HTTPStatus.OK)
                    self.send_header("Content-Type", "application/octet-stream")
                    self.send_header("Content-Length", str(size))
                    self.end_headers()
                    shutil.copyfileobj(fh, self.wfile, _CHUNK)
            except OSError as exc:  # pruned meanwhile, or the client went away
                log.debug("serving %s: %s", file, exc)

        def _listed_file(self, m: re.Match | None) -> Path | None:
            """The file asked for (`m`: its path matched) when its version's manifest lists it (or it is the
            manifest), inside the version."""
            if not m or not is_confined_name(m.group(2)):
                return None
            root = weights_dir / f"v{int(m.group(1))}"
            name = m.group(2)
            try:
                listed = WeightManifest.model_validate_json((root / MANIFEST_NAME).read_text()).sha256
            except (OSError, ContractError, ValueError):
                return None
            file = root / name
            if name != MANIFEST_NAME and name not in listed:
                return None
            return file if file.is_file() and inside(root, file) else None

        def log_message(self, format: str, *args) -> None:  # noqa: A002 — http.server's signature
            log.debug("weights http: " + format, *args)

    return WeightFiles
