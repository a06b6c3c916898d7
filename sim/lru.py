"""An in-process LRU cache bounded by approximate bytes (and entries), for what SGLS derives from schemas.

Why bytes: the keys are caller-supplied schemas, so entries differ in size by orders of magnitude; a bound on
the count alone (1024 × a 256 kB schema) says nothing about memory. Each entry is charged what the caller
estimates it costs; the least recently used entries go until the total fits. Thread-safe: validation and
synthesis run in worker threads.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any


class ByteLRU:
    def __init__(self, max_bytes: int, max_entries: int = 100_000):
        self.max_bytes = max_bytes
        self.max_entries = max_entries
        self.bytes = 0
        self._items: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def get_or_make(self, key: Hashable, make: Callable[[], Any], cost: Callable[[Any], int]) -> Any:
        """The cached value of `key`, else `make()` stored at `cost(value)` bytes. A value that alone exceeds the
        bound is returned but not kept. `make` runs outside the lock (two threads may both build a value)."""
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key][0]
        value = make()
        size = max(1, int(cost(value)))
        if size > self.max_bytes:
            return value
        with self._lock:
            if key in self._items:
                self.bytes -= self._items.pop(key)[1]
            self._items[key] = (value, size)
            self.bytes += size
            while self.bytes > self.max_bytes or len(self._items) > self.max_entries:
                self.bytes -= self._items.popitem(last=False)[1][1]
        return value

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.bytes = 0
