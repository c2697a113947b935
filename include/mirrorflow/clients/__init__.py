"""The Kafka clients of one flow run: `FlowClients` (`flow_clients`), the only owner of them.

Every step of a run asks the flow's `FlowClients` for a client; nothing else builds one. The names
are re-exported here: `from mirrorflow.clients import FlowClients`.
May import: `mirrorflow.errors`, `config`, `mm2`, `kafka`.
"""

from mirrorflow.clients.flow_clients import (
    ClientKind,
    FlowClients,
    Side,
    cluster_connection,
    flow_clients,
    mirror_client,
)

__all__ = ["ClientKind", "FlowClients", "Side", "cluster_connection", "flow_clients", "mirror_client"]
