"""The data path of one replication run: plan -> copy -> state -> report.

Owns: the planner (`planner`, pure `plan_units` plus its inputs) and the plan of a historical range
(`backfill_plan`), the unit copier (`copier`, built from a source `reader` and a
`transaction_writer`, its buffers sized by `budget`), the run orchestration (`runner`; `continuous`
and `follow` for runs without an end), how the plan and results travel (`handoff`), the Spark side
(`spark`: spark-submit and in-process; `spark_connect`; `spark_job`, the application), and the run
report (`run_report`, `run_progress`). Operations over a flow that copy (backfill) live in `ops/`.
May import: `mirrorflow.errors`, `process`, `reporting`, `config`, `mm2`, `kafka`, `clients`, `state`.
"""
