"""The front door of `config import`: which of the three formats a text is, and its importer."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from mirrorflow.config.mm2_import.connectors import from_connectors
from mirrorflow.config.mm2_import.properties_file import from_properties, parse_properties
from mirrorflow.config.mm2_import.result import Imported
from mirrorflow.config.mm2_import.strimzi import from_strimzi
from mirrorflow.errors import ConfigError


def import_file(path: str | Path, connect_worker: str | Path | None = None) -> str:
    """The mirrorflow YAML for an mm2.properties, a Strimzi KafkaMirrorMaker2 or MM2 connector configs;
    `connect_worker`: the Connect worker's properties the connectors ran on (its offset.storage.topic)."""
    p = Path(path)
    text = _read(p)
    worker = parse_properties(_read(Path(connect_worker))) if connect_worker else None
    return convert(text, str(p), worker).to_yaml(p.name)


def _read(p: Path) -> str:
    try:
        return p.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read {exc.filename}: {exc.strerror}", source=str(p)) from None


def convert(text: str, source: str = "<input>", worker: dict[str, str] | None = None) -> Imported:
    """Detect the format (Strimzi YAML with `kind: KafkaMirrorMaker2`, JSON connector configs, connector
    properties with `connector.class`, else an mm2.properties) and convert."""
    if text.lstrip().startswith(("{", "[")):
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise ConfigError(f"malformed JSON: {exc}", source=source) from None
        return from_connectors(doc if isinstance(doc, list) else [doc], source, worker)
    if re.search(r"^\s*kind:\s*KafkaMirrorMaker2\s*$", text, re.M):
        try:
            docs = [d for d in yaml.safe_load_all(text) if isinstance(d, dict) and d.get("kind") == "KafkaMirrorMaker2"]
        except yaml.YAMLError as exc:
            raise ConfigError(f"malformed YAML: {getattr(exc, 'problem', None) or exc}", source=source) from None
        if len(docs) != 1:
            raise ConfigError(f"expected one KafkaMirrorMaker2 resource, found {len(docs)}", source=source)
        return from_strimzi(docs[0], source)
    props = parse_properties(text)
    if "connector.class" in props and "clusters" not in props:
        return from_connectors([props], source, worker)
    return from_properties(props, source)
