"""Planning a run: which source ranges to copy, cut into units (`planner`, pure), the plan of a historical
range (`backfill_plan`), and what a run may be narrowed to (`run_options`). Imports nothing else of
`replication`."""
