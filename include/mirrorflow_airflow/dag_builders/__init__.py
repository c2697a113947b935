"""DAG builders, one module per DAG kind, all with one signature:

`build_<kind>_dags(cfg: Config | None = None) -> dict[str, DAG]` (None: load the config through
MirrorflowHook) and `build_<kind>_dag(cfg: Config, flow: FlowConfig) -> DAG`. Task callables
(`<what>_task`) reload the config through `MirrorflowHook(config_path)` (`get_flow`), call the core,
log its rendered result and return a small summary to XCom.
"""
