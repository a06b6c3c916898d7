"""What a bench result must say about the machine it ran on (no paths, no host names): CPU model and the
flags that decide precision and kernel speed, cores, load average."""

from __future__ import annotations

import os
import platform

from slca.models.precision import cpu_flags

RELEVANT_FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_tile", "amx_int8")


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine_facts() -> dict:
    flags = cpu_flags()
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "cpu_flags": [f for f in RELEVANT_FLAGS if f in flags],
        "load_average_1m": round(os.getloadavg()[0], 2),
        "python": platform.python_version(),
    }
