"""Where a planned run's tasks run: spark-submit and an in-process session (`spark`, `spark_job`), a Spark
Connect server (`spark_connect`, `connect_server`), or threads (`copy_modes` chooses), and how the plan
and results travel between them (`handoff`). May import `replication.plan` and `replication.task`."""
