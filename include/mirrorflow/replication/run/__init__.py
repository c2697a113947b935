"""One run of a flow from beginning to end: its steps whoever runs them (`run`), the CLI's one-shot and
continuous runs (`runner`, `continuous`), its report (`run_report`, `run_progress`, `copied`) and its
scratch directory (`scratch`). May import every other room of `replication`."""
