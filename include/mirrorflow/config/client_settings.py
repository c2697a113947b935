"""Whether librdkafka knows a client setting's name: asked by the loader (cluster settings), the
client overrides (`consumer.X`, ...) and the MM2 import, so all three refuse the same names the
same way. Java-only settings get a hint at their librdkafka equivalent.
"""

from __future__ import annotations

from mirrorflow.kafka.connection import setting_problem

JAVA_ONLY_HINTS = {
    "sasl.jaas.config": "a Java setting: use sasl.username and sasl.password "
    "(`mirrorflow config import` translates it)",
    "ssl.truststore.location": "a Java setting: use ssl.ca.location with a PEM file",
}


def librdkafka_problem(key: str, value: str = "") -> str | None:
    """Why librdkafka would refuse a client setting's name (None: it knows it). Values are not
    checked: they may be ${env:...} references, and checking must not touch any cluster."""
    return JAVA_ONLY_HINTS.get(key) or setting_problem(key)
