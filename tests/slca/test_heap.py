"""slca/heap.py: a fixed glibc mmap threshold returns a freed large block to the system at once."""

import subprocess
import sys
import textwrap

import pytest

PROBE = textwrap.dedent(
    """
    import ctypes, sys, threading
    from slca.heap import fix_mmap_threshold

    def rss_kib():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4

    fixed = fix_mmap_threshold(int(sys.argv[1]))
    out = []
    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    size = 8 << 20

    def work():
        out.append(churn())

    def churn():
        # free one big mapped block first: without a fixed threshold glibc raises it to 8 MiB, so what follows
        # (blocks just below 8 MiB, as a training step's tensors are) comes from the heap
        first = libc.malloc(size + 4096); libc.free(first)
        blocks = [libc.malloc(size - 4096) for _ in range(24)]
        for b in blocks:
            ctypes.memset(b, 1, size - 4096)
        keep = libc.malloc(64)  # above them on the heap: the heap cannot shrink from its top past it
        ctypes.memset(keep, 1, 64)
        before = rss_kib()
        for b in blocks:
            libc.free(b)
        return (before - rss_kib()) // 1024

    if sys.argv[2] == "thread":  # a thread's own malloc arena (serve's engine thread), not the main heap
        t = threading.Thread(target=work); t.start(); t.join()
    else:
        work()
    print(fixed, out[0])
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
@pytest.mark.parametrize("where", ["main", "thread"])
@pytest.mark.parametrize("kib", [0, 1024])
def test_a_fixed_threshold_returns_freed_large_blocks(kib, where):
    out = subprocess.run([sys.executable, "-c", PROBE, str(kib), where], capture_output=True, text=True, check=True)
    fixed, returned_mib = out.stdout.split()
    if kib:
        assert fixed == "True" and int(returned_mib) >= 180  # 24 × 8 MiB handed back on free
    else:  # glibc's dynamic threshold: the same frees stay in the heap (what the fix is for)
        assert fixed == "False" and int(returned_mib) < 24


def test_the_operators_environment_wins(monkeypatch):
    from slca.heap import ENV, fix_mmap_threshold

    monkeypatch.setenv(ENV, "65536")
    assert fix_mmap_threshold(1024) is False


TRIM_PROBE = textwrap.dedent(
    """
    import ctypes, sys, threading
    from slca.heap import fix_mmap_threshold, trim

    def rss_mib():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4 // 1024

    fix_mmap_threshold(1024)
    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    out = []

    def churn():  # a swap's small blocks in a reader thread's arena, each with a small survivor after it
        blocks, kept = [], []
        for _ in range(600):  # 600 × 200 KiB: under the 1 MiB threshold
            blocks.append(libc.malloc(200 << 10))
            ctypes.memset(blocks[-1], 1, 200 << 10)
            kept.append(libc.malloc(64))  # the hole a freed block leaves cannot be trimmed from the heap's top
            ctypes.memset(kept[-1], 1, 64)
        before = rss_mib()
        for b in blocks:
            libc.free(b)
        out.append(before - rss_mib())

    t = threading.Thread(target=churn); t.start(); t.join()
    freed_by_free = out[0]
    before_trim = rss_mib()
    released = trim() if sys.argv[1] == "trim" else False
    print(freed_by_free, before_trim - rss_mib(), released)
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
@pytest.mark.parametrize("how", ["trim", "none"])
def test_trim_returns_small_blocks_a_thread_freed(how):
    """Blocks under the threshold stay resident in their arena when freed (the ≈ 18 MiB serve kept per swap);
    `trim` gives them back."""
    out = subprocess.run([sys.executable, "-c", TRIM_PROBE, how], capture_output=True, text=True, check=True)
    by_free, by_trim, released = out.stdout.split()
    assert int(by_free) < 20  # ≈ 117 MiB freed, almost none of it returned
    if how == "trim":
        assert released == "True" and int(by_trim) >= 80
    else:
        assert int(by_trim) < 20


def test_available_memory_is_read_from_meminfo_and_none_where_it_is_missing(tmp_path):
    from slca.heap import available_memory_mib

    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24576000 kB\nMemFree:  1000 kB\nMemAvailable:   10240000 kB\n")
    assert available_memory_mib(str(meminfo)) == 10_000.0
    meminfo.write_text("MemTotal:       24576000 kB\n")  # kernels before 3.14 do not say
    assert available_memory_mib(str(meminfo)) is None
    assert available_memory_mib(str(tmp_path / "absent")) is None
    assert (available_memory_mib() or 1.0) > 0  # this machine's
