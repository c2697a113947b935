"""Fake time for one module under test, and only for it."""
from __future__ import annotations

import time
from collections.abc import Callable
from types import ModuleType, SimpleNamespace
from typing import Any


def fake_time(monkeypatch: Any, module: ModuleType, sleep: Callable[[float], Any] = lambda s: None,
              monotonic: Callable[[], float] = time.monotonic) -> None:
    """`module.time` (its `import time`) replaced by `sleep` and `monotonic`. Patching the time module itself
    reaches every thread of the worker: a thread an earlier test left looping on time.sleep spun on a test's
    `slept.append`, the list grew without end and the worker was OOM-killed at 19.8 GB (a full run, 2026-12-01)."""
    monkeypatch.setattr(module, "time", SimpleNamespace(sleep=sleep, monotonic=monotonic, time=time.time))
