"""`mirrorflow config import`: an MM2 configuration as mirrorflow YAML. The input is an
`mm2.properties` (dedicated mode), a Strimzi `KafkaMirrorMaker2`, or MM2 connector configs as
posted to a Kafka Connect cluster's REST API (JSON: one connector, or a list) or written as a
connector `.properties` file.

The point is that an MM2 user's configuration runs unchanged: property names are already the
same, so the work is (1) finding clusters, flows and where each property applies, (2) turning Java
client settings into librdkafka ones, and (3) never copying a secret in clear: a password found
in a JAAS line becomes a `${env:VAR}` reference, and the output says which variables to export.
Properties that mean nothing to mirrorflow (Connect worker settings, converters, ...) are listed
in the output's header comment rather than dropped silently. The header also says how to take each
flow over from the running MM2 (`mirrorflow takeover`, with the offsets topic and the connector name
of that deployment).

Modules by role: `detect` (which format; `convert`, `import_file`), one importer per format
(`properties_file`, `strimzi`, `connectors`), what they share (`flow_settings`: an MM2 flow's
properties; `java_clients`: Java client settings as librdkafka ones; `result`: `Imported`, the
document with its notes and environment variables) and `names`, the tables of what happens to
each MM2, Connect and Strimzi name (the compatibility table is generated from them).
"""

from mirrorflow.config.mm2_import.detect import convert, import_file

__all__ = ["convert", "import_file"]
