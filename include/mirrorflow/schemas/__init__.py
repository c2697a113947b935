"""Schema replication: each cluster's schema registry copied along with its topics, ids kept.

A record serialized through a Confluent-API registry carries its schema's id (magic byte 0, then 4 bytes);
a consumer on the target resolves that id in the target's registry, so the id must name the same schema
there. The modules, in the order one pass uses them:

* `registry_client`: the Confluent REST API over HTTP (any compatible registry), basic auth, errors that
  name the registry, never the secret;
* `catalog`: what a registry holds (subjects, versions with ids, references, compatibility), read through
  that API;
* `naming`: a subject's name on the target (the flow's replication policy: `A.orders-value`);
* `plan`: what to copy, pure: missing versions in dependency order, compatibility settings, conflicts
  (an id or a renamed subject that already holds something else on the target), orphans;
* `apicurio_writer` (Apicurio Registry's native import, content ids = the source's ids) and
  `confluent_writer` (Confluent's IMPORT mode): the target writers;
* `replicate`: one pass (`replicate_schemas`), its report (`report`).
"""
