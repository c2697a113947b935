"""Python's cyclic garbage collector, run less often while copy tasks copy in this process.

Every record a lane consumes is a confluent-kafka `Message`, an object the cyclic collector tracks, and a
batch holds its records until its transaction commits: hundreds of thousands at a time. With the
interpreter's thresholds (a young collection per 700 new objects, an older one every tenth) the collector
walked them again and again: 11.6% of a direct copy's CPU (perf of 1,000,000 x 100 B records:
`gc_collect_main`, `visit_decref`, `visit_reachable`, `Message_traverse`). Reference counting frees each
record after its batch all the same; only reference cycles wait for the collector, which still runs,
less often. Copy tasks may run side by side in one process (direct mode's threads, a Spark task copying
several planned tasks): the first to start sets the thresholds, the last to end puts back what it found.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

COPYING_THRESHOLDS = (100_000, 50, 100)  # young objects per collection, then how often the older ones

_lock = threading.Lock()
_copying = 0
_before: tuple[int, ...] = ()


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    global _copying, _before
    with _lock:
        if _copying == 0:
            _before = gc.get_threshold()
            gc.set_threshold(*COPYING_THRESHOLDS)
        _copying += 1
    try:
        yield
    finally:
        with _lock:
            _copying -= 1
            if _copying == 0:
                gc.set_threshold(*_before)
