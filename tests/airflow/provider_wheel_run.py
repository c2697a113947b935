"""Run by the fresh virtualenv of tests/airflow/test_provider_wheel.py (the built wheel, not this checkout):
a fresh Airflow database, the provider as Airflow sees it (providers, hooks, plugins), the user's DAG files
parsed, the pipeline run with dag.test(). Prints one JSON object for the test to check.

usage: python provider_wheel_run.py DAG_FOLDER GENERATED_DAGS_FILE DAG_ID...  (the DAGs run in that order)
"""

import json
import sys


def main() -> None:
    dag_folder, generated_file, dag_ids = sys.argv[1], sys.argv[2], sys.argv[3:]
    from airflow.dag_processing.dagbag import DagBag
    from airflow.models.xcom import XComModel
    from airflow.plugins_manager import _get_plugins
    from airflow.providers_manager import ProvidersManager
    from airflow.utils import db
    from airflow.utils.session import create_session
    from sqlalchemy import select

    import mirrorflow
    import mirrorflow_airflow

    db.resetdb(skip_init=False)
    providers = ProvidersManager()
    plugins, plugin_errors = _get_plugins()
    generated = DagBag(dag_folder=generated_file)
    bag = DagBag(dag_folder=dag_folder)
    out = {
        "modules": [mirrorflow.__file__, mirrorflow_airflow.__file__],
        "provider": providers.providers["mirrorflow"].version if "mirrorflow" in providers.providers else None,
        "hook": getattr(providers.hooks.get("mirrorflow"), "hook_class_name", None),
        "plugins": sorted(p.name for p in plugins),
        "plugin_errors": plugin_errors,
        "generated": sorted(generated.dag_ids),
        "import_errors": {**generated.import_errors, **bag.import_errors},
    }
    if bag.import_errors:
        print(json.dumps(out))
        return
    out["runs"] = {}
    for dag_id in dag_ids:
        run = bag.get_dag(dag_id).test()
        with create_session() as session:
            rows = session.scalars(
                select(XComModel).where(
                    XComModel.dag_id == dag_id, XComModel.run_id == run.run_id, XComModel.key == "return_value"
                )
            ).all()
            xcom = {row.task_id: XComModel.deserialize_value(row) for row in rows}
        tasks = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
        out["runs"][dag_id] = {"state": str(run.state), "tasks": tasks, "xcom": xcom}
    print(json.dumps(out, default=str))


if __name__ == "__main__":
    main()
