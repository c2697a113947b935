"""One copy task, where it runs (a Spark task, a thread): its source reads (`reader`), its lanes and rounds
(`task_copier`, `task_rounds`), its slot producer (`task_producer`), its transaction (`copy_transaction`: the
epoch, the claim, begin, commit, abort, every timeout), what fills a transaction (`transaction_writer`) and
what its failures mean (`write_failures`), whether it may still write (`task_succession`), how often
Python's collector runs meanwhile (`collector`). May import `replication.plan`."""
