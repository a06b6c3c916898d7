"""Peak memory and CPU time of a tree of processes, sampled from /proc (Linux).

Why sample rather than ask each process: the pipeline is several processes (serve, Celery workers and their
pool children, the learner, Redis) that start and exit on their own; the sum of their resident sets at one
instant is what the machine must hold, and a process's CPU seconds survive in our table after it exits.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

PAGE = os.sysconf("SC_PAGE_SIZE")
TICK = os.sysconf("SC_CLK_TCK")


@dataclass
class ProcInfo:
    ppid: int
    rss_bytes: int
    cpu_s: float
    cmdline: str


def read_proc(pid: int, cmdline: bool = True) -> ProcInfo | None:
    """A live process's parent, resident set and user + system CPU seconds (all from `stat`, one read) and, with
    `cmdline`, its command line ("" without); None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmd = read_cmdline(pid) if cmdline else ""
    except OSError:
        return None
    # after the command name: state [0], ppid [1], ..., utime [11], stime [12], ..., rss in pages [21]
    fields = stat.rsplit(")", 1)[1].split()
    return ProcInfo(int(fields[1]), int(fields[21]) * PAGE, (int(fields[11]) + int(fields[12])) / TICK, cmd)


def read_cmdline(pid: int) -> str:
    """A process's command line, arguments joined by spaces ("" for a zombie); OSError when it is gone."""
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()


def read_rss_pss(pid: int) -> tuple[int, int] | None:
    """A live process's resident and proportional set sizes in bytes (`smaps_rollup`); None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return None
    kib = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in ("Rss", "Pss") and rest.split():
            kib[key] = int(rest.split()[0])
    return (kib["Rss"] << 10, kib["Pss"] << 10) if len(kib) == 2 else None


def proc_table(cmdlines: bool = True) -> dict[int, ProcInfo]:
    """Every live process now: pid → `ProcInfo`. Without `cmdlines` each command line is "": a sampler reading ten
    times a second pays one file per process of the machine (`stat`) and reads the command lines of its own tree
    only (`stat`, `statm` and `cmdline` of ≈ 170 processes cost ≈ 13% of a core)."""
    table = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (info := read_proc(int(name), cmdline=cmdlines)) is not None:
            table[int(name)] = info
    return table


def tree_pids(roots: list[int], table: dict[int, ProcInfo]) -> set[int]:
    """The live processes of `table` at or below any of `roots`."""
    return _below(roots, table) & set(table)


def tree_rss(root: int, table: dict[int, ProcInfo]) -> int:
    """Resident bytes of `root` and every process below it (0 when it is gone)."""
    return sum(table[pid].rss_bytes for pid in descendants(root, table) if pid in table)


def descendants(root: int, table: dict[int, ProcInfo]) -> set[int]:
    """`root` and every process below it in `table` (pid → info)."""
    return _below([root], table) & (set(table) | {root})


def _below(roots: list[int], table: dict[int, ProcInfo]) -> set[int]:
    """`roots` and every process below them, the table's parent links walked once."""
    children: dict[int, list[int]] = {}
    for pid, info in table.items():
        children.setdefault(info.ppid, []).append(pid)
    out, todo = set(), list(roots)
    while todo:
        pid = todo.pop()
        if pid in out:
            continue
        out.add(pid)
        todo += children.get(pid, [])
    return out


@dataclass
class TreeSampler:
    """Samples the processes under `roots` every `interval_s` in a thread; `role` names a process from its
    command line (processes with one role are summed)."""

    roots: list[int]
    role: callable
    interval_s: float = 1.0
    peak_rss_bytes: int = 0
    peak_rss_by_role: dict[str, int] = field(default_factory=dict)
    cpu_s: dict[int, tuple[str, float]] = field(default_factory=dict)
    samples: int = 0
    last_rss_bytes: int = 0
    """The whole tree's resident set at the latest sample (for a series over time: `slca bench soak`)."""
    last_rss_by_role: dict[str, int] = field(default_factory=dict)
    pss_every_s: float | None = None
    """With a value: every so many seconds, one process of the tree (the one read longest ago) has its proportional
    set size read from `smaps_rollup` (a page-table walk: ≈ 10-30 ms for a process of GiBs, too dear for every
    reading), and each reading's `peak_pss_bytes` counts every process as its RSS less the shared excess it had at
    its latest such read. None: not read."""
    peak_pss_bytes: int = 0
    """The peak of the tree's summed proportional set sizes, as `pss_every_s` says (a process not yet read counts
    its whole RSS): pages shared between processes (torch's libraries in serve, the learner and the grammar host)
    counted once, where the RSS sum counts them in each."""
    peak_pss_by_role: dict[str, int] = field(default_factory=dict)
    shared_excess: dict[int, int] = field(default_factory=dict)
    """pid → RSS − PSS at its latest `smaps_rollup` read."""
    _pss_read_at: dict[int, float] = field(default_factory=dict)
    _pss_due: float = 0.0
    began_s: float | None = None
    """`time.monotonic()` at the first sample (with `samples_per_s`: how often the peak was looked for)."""
    last_s: float | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def sample(self) -> None:
        table = proc_table(cmdlines=False)
        pids = set()
        for pid in tree_pids(self.roots, table):
            try:
                table[pid].cmdline = read_cmdline(pid)
            except OSError:  # gone since its stat was read
                continue
            pids.add(pid)
        total, by_role = 0, {}
        for pid in pids:
            info = table[pid]
            # a process that has exited but is not yet reaped (a zombie) has an empty command line: it keeps
            # the role it was sampled under, or its CPU would be booked to whatever role "" maps to
            known = self.cpu_s.get(pid)
            role = known[0] if known is not None and not info.cmdline else self.role(info.cmdline)
            total += info.rss_bytes
            by_role[role] = by_role.get(role, 0) + info.rss_bytes
            # the last reading of a process that has exited stays: its CPU was spent on the run
            self.cpu_s[pid] = (role, max(info.cpu_s, self.cpu_s.get(pid, (role, 0.0))[1]))
        self.last_rss_bytes, self.last_rss_by_role = total, by_role
        if total > self.peak_rss_bytes:
            self.peak_rss_bytes, self.peak_rss_by_role = total, by_role
        now = time.monotonic()
        if self.pss_every_s is not None:
            self._proportional(pids, table, now)
        self.samples += 1
        self.last_s = now
        if self.began_s is None:
            self.began_s = self.last_s

    def _proportional(self, pids: set[int], table: dict[int, ProcInfo], now: float) -> None:
        """Refresh one process's shared excess when due, then the tree's summed PSS estimate and its peak."""
        if now >= self._pss_due and pids:
            # the one read longest ago (never read first, the largest of those first)
            pid = min(pids, key=lambda p: (self._pss_read_at.get(p, -1.0), -table[p].rss_bytes))
            rss_pss = read_rss_pss(pid)
            if rss_pss is not None:
                self.shared_excess[pid] = max(0, rss_pss[0] - rss_pss[1])
            self._pss_read_at[pid] = now
            self._pss_due = now + self.pss_every_s
        for gone in self.shared_excess.keys() - pids:  # its pid may come back as another process
            del self.shared_excess[gone]
        for gone in self._pss_read_at.keys() - pids:
            del self._pss_read_at[gone]
        total, by_role = 0, {}
        for pid in pids:
            share = max(0, table[pid].rss_bytes - self.shared_excess.get(pid, 0))
            role = self.cpu_s[pid][0]
            total += share
            by_role[role] = by_role.get(role, 0) + share
        if total > self.peak_pss_bytes:
            self.peak_pss_bytes, self.peak_pss_by_role = total, by_role

    @property
    def samples_per_s(self) -> float:
        """Samples per second over the sampled span (0 before two samples): a peak shorter than the gap between
        two samples can be missed, so a peak is reported with it."""
        span = (self.last_s or 0.0) - (self.began_s or 0.0)
        return (self.samples - 1) / span if self.samples > 1 and span > 0 else 0.0

    def cpu_by_role(self, since: dict[int, tuple[str, float]] | None = None) -> dict[str, float]:
        """CPU seconds per role, minus what each process had spent at `since` (a copy of `cpu_s`)."""
        out: dict[str, float] = {}
        for pid, (role, cpu) in self.cpu_s.items():
            out[role] = out.get(role, 0.0) + cpu - (since or {}).get(pid, (role, 0.0))[1]
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))

    def read_until_stopped(self, clock=time.monotonic) -> None:
        """Sample every `interval_s` on a fixed clock until `stop`: waiting `interval_s` after each reading added
        the reading's own time to every gap (0.1 s read ≈ 9 times a second on the RL bench's busy 2 cores, under
        the ≥ 10 it promises)."""
        due = clock()
        while not self._stop.is_set():
            self.sample()
            due += self.interval_s
            self._stop.wait(max(0.0, due - clock()))

    def start(self) -> "TreeSampler":
        self._thread = threading.Thread(target=self.read_until_stopped, name="proc-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.sample()
