"""The data path of one replication run: plan -> copy -> state -> report.

Owns: the planner (`planner`, pure `plan_units` plus its inputs), the unit copier (`copier`,
built from a source `reader` and a transactional `transaction_writer`), the run orchestration and the Spark
side (`runner`, `spark_job`), and the run report (`run_report`).
May import: `mirrorflow.errors`, `config`, `mm2`, `kafka`, `clients`, `state`.
"""
