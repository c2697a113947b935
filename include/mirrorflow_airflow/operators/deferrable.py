"""DeferrableTask: a Python function as a task that can wait on the triggerer, not in a worker slot.

TaskFlow's `@task` cannot defer (Airflow resumes a deferred task by calling a method of its
operator). The function of a DeferrableTask gets the task's context and ends, or calls
`wait_on_triggerer` with a trigger; the triggerer runs the trigger, and Airflow starts the task
again: the function is called once more with the trigger's `event` and the keyword arguments it
passed on (a new process, maybe on another machine: the arguments are all it keeps).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any, NoReturn

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import TaskDeferred


class DeferrableTask(BaseOperator):
    """Runs `python_callable(context, **op_kwargs)`; after a wait, with `event=` and what it passed on."""

    def __init__(
        self, *, python_callable: Callable[..., Any], op_kwargs: dict[str, Any] | None = None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.python_callable, self.op_kwargs = python_callable, dict(op_kwargs or {})

    def execute(self, context: Any) -> Any:
        return self.python_callable(context, **self.op_kwargs)

    def resume(self, context: Any, **passed: Any) -> Any:
        return self.python_callable(context, **self.op_kwargs, **passed)

    def ended(self, context: Any, result: Any = None, event: Any = None) -> Any:
        return result


def end_after(seconds: float, result: Any) -> NoReturn:
    """End a DeferrableTask with `result` after waiting `seconds` on the triggerer."""
    from airflow.providers.standard.triggers.temporal import TimeDeltaTrigger

    raise TaskDeferred(
        trigger=TimeDeltaTrigger(timedelta(seconds=seconds)), method_name="ended", kwargs={"result": result}
    )


def wait_on_triggerer(trigger: Any, timeout_s: float, **passed: Any) -> NoReturn:
    """End this attempt of a DeferrableTask's function and wait for `trigger` on the triggerer (at
    most `timeout_s`: a triggerer that never runs it fails the task); `passed` comes back."""
    raise TaskDeferred(trigger=trigger, method_name="resume", kwargs=passed, timeout=timedelta(seconds=timeout_s))
