"""The data path of one replication run: plan -> copy -> state -> report, in four rooms, each importing
only from the rooms before it (tests/unit/test_layers.py):

* `plan`: which source ranges a run copies, cut into units (`planner`, pure), a historical range
  (`backfill_plan`), what a run may be narrowed to (`run_options`);
* `task`: one copy task where it runs: source reads, lanes and rounds, the slot producer, the copy
  transaction (`copy_transaction`: the epoch, the claim, commit, abort, timeouts), what fills it and
  what its failures mean;
* `executors`: where the tasks run (spark-submit, an in-process session, a Spark Connect server,
  threads: `copy_modes`) and how the plan and results travel (`handoff`);
* `run`: one run from beginning to end (`run.ReplicationRun`), the CLI's one-shot and continuous runs
  (`runner`, `continuous`), the report (`run_report`, `run_progress`, `copied`).

Operations over a flow that copy (backfill) live in `ops/`.
May import: `mirrorflow.errors`, `process`, `reporting`, `config`, `mm2`, `kafka`, `clients`, `state`.
"""
