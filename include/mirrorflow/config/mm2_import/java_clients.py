"""Java client settings (an MM2 cluster's, a connector's `source.cluster.*` / `target.cluster.*`) as
librdkafka settings: JAAS lines, key stores, Java-only classes; secrets become `${env:...}`."""

from __future__ import annotations

import re
from typing import Any

from mirrorflow.config.client_settings import librdkafka_problem
from mirrorflow.config.mm2_import.result import Imported, looks_secret

JAAS_RE = re.compile(r"""(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|'([^']*)'|([^\s;]+))""")
LOGIN_MODULES = {"PlainLoginModule": "PLAIN", "ScramLoginModule": None, "OAuthBearerLoginModule": "OAUTHBEARER"}


def librdkafka_settings(imp: Imported, alias: str, java: dict[str, Any], where: str) -> dict[str, str]:
    """librdkafka settings for a cluster from Java client settings; secrets become ${env:...}."""
    out: dict[str, str] = {}
    for key, value in java.items():
        value = "" if value is None else str(value)
        full = where + key
        if key == "sasl.jaas.config":
            out.update(_jaas(imp, alias, value, java.get("sasl.mechanism"), full))
        elif key in (
            "ssl.truststore.location",
            "ssl.truststore.password",
            "ssl.truststore.type",
            "ssl.keystore.location",
            "ssl.keystore.password",
            "ssl.keystore.type",
        ):
            if key == "ssl.truststore.location" and str(java.get("ssl.truststore.type", "")).upper() == "PEM":
                out["ssl.ca.location"] = value
            elif key == "ssl.keystore.location" and str(java.get("ssl.keystore.type", "")).upper() == "PKCS12":
                out["ssl.keystore.location"] = value  # librdkafka reads PKCS#12 key stores
                if "ssl.keystore.password" in java:
                    out["ssl.keystore.password"] = imp.env(
                        alias, "SSL_KEYSTORE_PASSWORD", f"the key store password ({where}ssl.keystore.password)"
                    )
            elif key.endswith(".location"):
                what = (
                    "ssl.ca.location (CA certificate)"
                    if "truststore" in key
                    else "ssl.certificate.location and ssl.key.location"
                )
                imp.notes.append(
                    f"{full}: Java key stores are not supported by librdkafka; convert {value} to "
                    f"PEM and set {what} (not imported)"
                )
        elif key == "ssl.key.password":
            out[key] = imp.env(alias, "SSL_KEY_PASSWORD", f"the private key password ({full})")
        elif key == "ssl.endpoint.identification.algorithm":
            out[key] = value.lower() if value else "none"
        elif key in ("sasl.login.callback.handler.class", "sasl.client.callback.handler.class", "sasl.login.class"):
            imp.notes.append(f"{full}: a Java class; librdkafka needs its own mechanism settings (not imported)")
        elif key in ("sasl.mechanism",):
            out[key] = value
        else:
            problem = librdkafka_problem(key, value)
            if problem:
                imp.notes.append(f"{full}: not imported ({problem})")
            elif looks_secret(key):
                out[key] = imp.env(alias, re.sub(r"[^A-Za-z0-9]+", "_", key).upper(), f"the value of {full}")
            else:
                out[key] = value
    if "bootstrap.servers" in out:  # bootstrap first: easier to read
        out = {"bootstrap.servers": out.pop("bootstrap.servers"), **out}
    return out


def _jaas(imp: Imported, alias: str, jaas: str, mechanism: Any, where: str) -> dict[str, str]:
    module = next((m for m in LOGIN_MODULES if m in jaas), None)
    opts = {m.group(1): next(g for g in m.groups()[1:] if g is not None) for m in JAAS_RE.finditer(jaas)}
    if module in ("PlainLoginModule", "ScramLoginModule") and "username" in opts:
        out = {
            "sasl.username": opts["username"],
            "sasl.password": imp.env(alias, "SASL_PASSWORD", f"the SASL password of {opts['username']!r} ({where})"),
        }
        if not mechanism:
            out["sasl.mechanism"] = "PLAIN" if module == "PlainLoginModule" else "SCRAM-SHA-512"
        return out
    if module == "OAuthBearerLoginModule":
        imp.notes.append(
            f"{where}: OAUTHBEARER login: configure librdkafka's sasl.oauthbearer.* settings (not imported)"
        )
        return {}
    imp.notes.append(f"{where}: a JAAS configuration mirrorflow cannot translate (not imported)")
    return {}
