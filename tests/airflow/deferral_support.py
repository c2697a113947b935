"""Running a DeferrableTask's function outside Airflow, its waits on the triggerer included."""
from __future__ import annotations


def until_done(step, *args, on_wait=None):
    """Call a DeferrableTask's function as Airflow does: each wait it defers to the triggerer runs its
    trigger here (as the triggerer would; `on_wait(trigger)` first), then the function again with the
    event and what it passed on. Returns (its result, the triggers it waited on)."""
    import asyncio

    from airflow.sdk.exceptions import TaskDeferred

    waits, passed = [], {}

    async def first_event(trigger):
        async for event in trigger.run():
            return event.payload

    while True:
        try:
            return step(*args, **passed), waits
        except TaskDeferred as deferred:
            waits.append(deferred.trigger)
            if on_wait is not None:
                on_wait(deferred.trigger)
            passed = {**deferred.kwargs, "event": asyncio.run(first_event(deferred.trigger))}
