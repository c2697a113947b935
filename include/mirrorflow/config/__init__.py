"""The mirrorflow configuration: clusters, flows and their MirrorMaker 2 properties.

One YAML file (see include/config/mirrorflow.yaml) holds:

    clusters:            alias -> librdkafka client settings (+ `airflow.conn.id`)
    defaults:            MM2 properties applied to every flow (MM2's top-level properties)
    flows:               "A->B" -> MM2 properties for that flow (MM2's `A->B.` prefix)
    spark:               master and submit settings for the copy job

Property names are MirrorMaker 2's wherever one exists (`topics`, `groups.exclude`,
`replication.policy.separator`, `sync.group.offsets.enabled`, `tasks.max`, ...); mirrorflow's own
additions are listed in FLOW_PROPERTIES with `mm2=False`.

Owns: the model (`model`), the property table (`properties`), client overrides and their scope
(`overrides`), whether librdkafka knows a setting (`client_settings`), loading and validation
(`loading`), secrets (`secrets`), the mm2.properties / Strimzi / Connect import (`mm2_import/`, a
module per format and per shared step) and the compatibility table generated from all of them
(`compat`).
May import: `mirrorflow.errors`, `mirrorflow.kafka.connection` (is a name a librdkafka setting?) and
`mirrorflow.mm2` (to validate a policy name and a regex list as the filters join it).
"""

from mirrorflow.config.client_settings import librdkafka_problem
from mirrorflow.config.loading import config_path, default_config_path, load, parse, project_dir
from mirrorflow.config.model import FLOW_NAME_RE, ClusterConfig, Config, FlowConfig, SparkConfig
from mirrorflow.config.properties import FLOW_PROPERTIES, Prop, did_you_mean
from mirrorflow.config.secrets import SECRET_KEY_RE, redact

__all__ = [
    "FLOW_NAME_RE",
    "FLOW_PROPERTIES",
    "SECRET_KEY_RE",
    "ClusterConfig",
    "Config",
    "FlowConfig",
    "Prop",
    "SparkConfig",
    "config_path",
    "default_config_path",
    "did_you_mean",
    "librdkafka_problem",
    "load",
    "parse",
    "project_dir",
    "redact",
]
