"""The grammar host: a process that builds forced-call grammars, each build in a child forked for it alone.

Why a process per build: xgrammar's builds (JSON schema → grammar, grammar → a token mask cache for the served
vocabulary) are C++ that cannot be interrupted from Python; in a thread, a build that overran its time bound ran on
and held its thread and memory. A forked child is killed at its deadline (SIGKILL: cancelled, nothing left
running), runs under an address-space bound (`--memory-mib` on top of what the host already maps: a build that
needs more fails or dies), and may send back at most `--max-bytes` (else it is killed: the answer would be too big
to keep). The host imports xgrammar (and, through it, torch and transformers) once; forking it costs milliseconds.
The host itself never builds, so it stays single-threaded and safe to fork. A child builds at the lowest CPU
priority (`_below_serve`): a costly build takes only what the engine leaves, never half of the engine's core.

Protocol (JSON lines, ASCII, on stdin/stdout; serve/engines/grammar_builder.py is the other side):
  in:  {"id": 1, "schema": "<JSON schema text>", "timeout_s": 10}  → EBNF and the compiled grammar
       {"id": 2, "ebnf": "<grammar text>", "timeout_s": 10}        → the compiled grammar of that grammar
       {"cancel": 1}                                                 → the build is killed, nothing answered
  out: {"ready": true} once, then per build
       {"id": 1, "ok": true, "ebnf": "...", "compiled": "<CompiledGrammar.serialize_json()>", "bytes": n}
       {"id": 1, "ok": false, "kind": "schema"|"timeout"|"memory"|"bytes", "reason": "..."}
End of stdin: every child is killed and the host exits. Model output and caller data are never executed here:
schemas are data given to xgrammar's parser.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import select
import signal
import sys
import time
from dataclasses import dataclass, field

from slca.heap import trim

PREFIX = '"<tool_call>\\n"'
SUFFIX = '"\\n</tool_call>"'


def reason_of(exc: BaseException) -> str:
    """xgrammar's message without its log prefix (`[12:00:00] /project/cpp/x.cc:83: `), one line, bounded."""
    lines = str(exc).strip().splitlines()
    text = lines[0] if lines else type(exc).__name__
    text = re.sub(r"^\[[^\]]*\]\s*\S+:\d+:\s*", "", text)
    text = re.sub(r"^Check failed: \(.*?\) is false:\s*", "", text)
    return text[:300]


def grammar_text(schema_json: str) -> str:
    """EBNF for one `<tool_call>` block whose JSON follows `schema_json`; ValueError (the reason) when xgrammar
    cannot turn the schema into a grammar (a lookbehind `pattern`, a bound beyond int64 …)."""
    import xgrammar as xgr

    try:
        grammar = xgr.Grammar.concat(
            xgr.Grammar.from_ebnf(f"root ::= {PREFIX}"),
            xgr.Grammar.from_json_schema(schema_json, any_whitespace=False),
            xgr.Grammar.from_ebnf(f"root ::= {SUFFIX}"),
        )
    except (RuntimeError, ValueError, TypeError) as exc:  # xgrammar's C++ checks surface as RuntimeError
        raise ValueError(reason_of(exc)) from None
    return str(grammar)


def tokenizer_info(model_dir: str, vocab_size: int, stop_ids: list[int]):
    """The xgrammar view of the served vocabulary (the hf engine builds its own the same way)."""
    import xgrammar as xgr
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    return xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size, stop_token_ids=sorted(stop_ids))


def _build(request: dict, info) -> dict:
    """One build, in the child."""
    import xgrammar as xgr

    try:
        ebnf = request["ebnf"] if "ebnf" in request else grammar_text(request["schema"])
        compiled = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False).compile_grammar(ebnf)
    except ValueError as exc:
        return {"ok": False, "kind": "schema", "reason": str(exc)}
    except MemoryError:
        return {"ok": False, "kind": "memory", "reason": "the grammar needs more memory than a build may take"}
    except (RuntimeError, TypeError) as exc:
        return {"ok": False, "kind": "schema", "reason": reason_of(exc)}
    text = compiled.serialize_json()
    return {"ok": True, "ebnf": ebnf, "compiled": text, "bytes": max(len(text), compiled.memory_size_bytes)}


@dataclass
class _Child:
    pid: int
    fd: int
    deadline: float
    data: bytearray = field(default_factory=bytearray)


class Host:
    def __init__(self, info, memory_mib: int, max_bytes: int):
        self.info, self.memory_mib, self.max_bytes = info, memory_mib, max_bytes
        self.children: dict[int, _Child] = {}

    def start(self, request: dict) -> None:
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: bound its memory, build, answer, exit (no cleanup of the host's state)
            os.close(read_fd)
            code = 0
            try:
                _below_serve()
                _bound_memory(self.memory_mib)
                out = json.dumps(_build(request, self.info)).encode()
                with os.fdopen(write_fd, "wb") as pipe:
                    pipe.write(out)
            except BaseException:  # noqa: BLE001 - whatever happened, the host reports a failed build
                code = 1
            os._exit(code)
        os.close(write_fd)
        os.set_blocking(read_fd, False)
        self.children[request["id"]] = _Child(pid, read_fd, time.monotonic() + float(request["timeout_s"]))

    def kill(self, build_id: int) -> None:
        child = self.children.pop(build_id, None)
        if child is not None:
            _reap(child, kill=True)

    def readable(self, build_id: int) -> dict | None:
        """The child's answer once it has closed its pipe; None while it writes."""
        child = self.children[build_id]
        while True:
            try:
                chunk = os.read(child.fd, 1 << 20)
            except BlockingIOError:
                chunk = None
            if chunk is None:
                break
            if not chunk:  # closed: done (or dead)
                del self.children[build_id]
                status = _reap(child, kill=False)
                return _answer_of(bytes(child.data), status, self.memory_mib)
            child.data += chunk
            if len(child.data) > self.max_bytes * 2 + 4096:  # JSON escapes may double the text
                self.kill(build_id)
                return {"ok": False, "kind": "bytes", "reason": f"the compiled grammar exceeds {self.max_bytes} bytes"}
        return None

    def overdue(self) -> list[int]:
        now = time.monotonic()
        return [i for i, c in self.children.items() if c.deadline <= now]

    def wait_s(self) -> float | None:
        if not self.children:
            return None
        return max(0.0, min(c.deadline for c in self.children.values()) - time.monotonic())


def _answer_of(data: bytes, status: int, memory_mib: int) -> dict:
    try:
        answer = json.loads(data)
    except ValueError:
        answer = None
    if isinstance(answer, dict):
        return answer
    if os.WIFSIGNALED(status):
        why = f"killed by signal {os.WTERMSIG(status)}"
    else:
        why = f"exit status {os.WEXITSTATUS(status)}"
    return {"ok": False, "kind": "memory", "reason": f"the build failed ({why}): more than {memory_mib} MiB?"}


def _reap(child: _Child, kill: bool) -> int:
    if kill:
        try:
            os.kill(child.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    os.close(child.fd)
    return os.waitpid(child.pid, 0)[1]


NICE_STEPS_BELOW = 10
"""A build runs at least this many steps of niceness below serve (≈ 9× less CPU where both want it), else in the
idle class."""


def _below_serve() -> None:
    """Let the build take only the CPU that serve and the rest of the system leave. At serve's own priority a
    costly build (up to `grammar_compile_timeout_s` of one core) took half the core it shared with the engine (the
    hf engine's small chats 1.9× as slow, both on one core) — worse for an OpenMP thread team, which waits at each
    parallel region for its thread on that core: in the soak (issue 36, costly_grammars, vLLM on 2 cores) a small
    chat sent meanwhile took 10.1 s, 3× its time alone. A real schema's build takes milliseconds of CPU, so even at
    the lowest priority it ends well within its bound. Niceness 19; the idle class where serve itself runs within
    `NICE_STEPS_BELOW` of 19 (niceness cannot go lower). The host stays at serve's priority: it kills builds at
    their deadlines."""
    try:
        if os.getpriority(os.PRIO_PROCESS, 0) <= 19 - NICE_STEPS_BELOW:
            os.setpriority(os.PRIO_PROCESS, 0, 19)
        else:
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):  # no such scheduling here (not Linux): the build runs at serve's priority
        pass


def _bound_memory(memory_mib: int) -> None:
    """Address space: what the host maps already (its libraries, the vocabulary) plus `memory_mib`."""
    with open("/proc/self/statm") as f:
        mapped = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    limit = mapped + memory_mib * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def serve(host: Host, lines: "_Lines") -> None:
    """Read requests until stdin closes; answer each build once (cancelled ones never)."""
    while True:
        fds = [lines.fd, *(c.fd for c in host.children.values())]
        ready, _, _ = select.select(fds, [], [], host.wait_s())
        if lines.fd in ready:
            got = lines.read()
            if got is None:  # serve closed our stdin (or died): nothing more to do
                for build_id in list(host.children):
                    host.kill(build_id)
                return
            for request in got:
                _handle(host, request)
        for build_id, child in list(host.children.items()):
            if child.fd in ready and (answer := host.readable(build_id)) is not None:
                _send({"id": build_id, **answer})
        for build_id in host.overdue():
            host.kill(build_id)
            _send({"id": build_id, "ok": False, "kind": "timeout", "reason": "timed out"})


class _Lines:
    """JSON lines from a file descriptor, read with `os.read` (a buffered reader would hide read-ahead from
    `select`)."""

    def __init__(self, fd: int):
        self.fd, self.pending = fd, b""

    def read(self) -> list[dict] | None:
        """The complete lines that arrived (one read); None at end of input."""
        chunk = os.read(self.fd, 1 << 20)
        if not chunk:
            return None
        self.pending += chunk
        *lines, self.pending = self.pending.split(b"\n")
        return [json.loads(line) for line in lines if line.strip()]

    def first(self) -> dict:
        while b"\n" not in self.pending:
            chunk = os.read(self.fd, 1 << 20)
            if not chunk:
                raise SystemExit("grammar host: no setup line on stdin")
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        return json.loads(line)


def _handle(host: Host, request: dict) -> None:
    if "cancel" in request:
        host.kill(request["cancel"])
    else:
        host.start(request)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memory-mib", type=int, required=True)
    parser.add_argument("--max-bytes", type=int, required=True)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # serve's Ctrl-C stops serve, which closes our stdin
    lines = _Lines(sys.stdin.fileno())
    setup = lines.first()
    info = tokenizer_info(setup["model_dir"], setup["vocab_size"], setup["stop_ids"])
    # the heap loading the tokenizer freed, back to the system (514 → 468 MiB RSS on SmolLM2's vocabulary); every
    # build's child is forked from this host, so it starts from the smaller image too
    trim()
    _send({"ready": True})
    serve(Host(info, args.memory_mib, args.max_bytes), lines)


if __name__ == "__main__":
    main()
