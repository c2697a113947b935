"""What touching memory costs on this machine now: one line `scripts/test` prints before the tests.

On 2026-12-02 the 2-core machine read a random 4 KiB page of a 256 MB buffer (every page backed) in 5-11 us of
CPU, and in 26-96 us when the process had slept 0.3-3 s before (a C probe; this Python one reads less, 2-17 us).
Continuous CPU work ran at its usual speed; work after a sleep did not: 1,000 HashMap operations in a JVM took
6-8 ms of CPU after 0.3 s asleep against 0.2 ms in a busy loop, and an idle broker burned 8-11 CPU s per 30 s
(0.9 a minute the twelfth session): its KRaft controller's events took seconds, once 2 minutes, and fenced its
own broker. A suite made of processes that wake up to a little work failed a dozen timing-bound tests on it.
A run's times and timing failures on such a machine say little about the code; this line says which kind of
machine a run had. There is no figure of a normal day yet (the probe is new): on common hardware a page read
costs well under 1 us.
"""

from __future__ import annotations

import mmap
import random
import statistics
import time

BUFFER = 256 * 1024 * 1024
PAGE = 4096
READS = 2000


def page_read_us(buf: mmap.mmap, rng: random.Random, idle_s: float = 0.0) -> float:
    """CPU microseconds per read of a random page, each round after `idle_s` asleep (the median of five)."""
    pages = len(buf) // PAGE
    rounds = []
    for _ in range(5):
        picks = [rng.randrange(pages) * PAGE for _ in range(READS)]
        time.sleep(idle_s)
        began = time.thread_time()
        for at in picks:
            buf[at]
        rounds.append((time.thread_time() - began) / READS * 1e6)
    return statistics.median(rounds)


def measure(idle_s: float = 0.3) -> tuple[float, float]:
    """(a random page read right away, and after `idle_s` asleep), in CPU microseconds."""
    rng = random.Random(7)
    with mmap.mmap(-1, BUFFER) as buf:
        for at in range(0, BUFFER, PAGE):  # every page backed before anything is timed
            buf[at] = 1
        return page_read_us(buf, rng), page_read_us(buf, rng, idle_s)


def main() -> int:
    hot, after = measure()
    print(
        f"== machine: a random page read costs {hot:.1f} us of CPU, {after:.1f} us after 0.3 s asleep "
        "(mirrorflow_dev/machine_check.py says why this matters)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
