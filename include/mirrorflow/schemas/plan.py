"""What one pass copies, decided from the two catalogs alone (pure: no registry is touched here).

* Which subjects: those of the topics the flow replicates (a TopicNameStrategy subject whose topic passes
  the flow's topic filter), every subject not named after a topic, and every subject version a copied
  schema references; never one that came from the target (the policy reads its origin from its name, as
  for topics: no cycle in active/active flows).
* Which versions: each source version whose renamed subject and version the target does not hold yet
  (incremental). A version the target holds with the same id and schema is done; one it holds with another
  id or schema is a conflict.
* In which order: a version after the versions it references and after the earlier versions of its own
  subject (a registry's `latest` is the last one written).
* Compatibility: each copied subject gets the source's effective level (its own, else the source's global
  one) as a subject-level setting on the target, when the target's differs: the target's global setting,
  which other flows and applications share, is never changed.
* Orphans: target subjects the policy says came from this source that the source no longer has: reported,
  never deleted.

Conflicts stop the pass before anything is written (`SchemaConflict`, naming each subject, version and id).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from mirrorflow.errors import MirrorflowError
from mirrorflow.mm2.policy import DefaultReplicationPolicy
from mirrorflow.schemas.catalog import Catalog, Reference, SchemaVersion
from mirrorflow.schemas.naming import remote_subject, subject_source, topic_of


class SchemaConflict(MirrorflowError):
    """The target already holds something else where the source's schema must go (an id, or a renamed
    subject's version): nothing was written."""

    def __init__(self, flow: str, conflicts: list[str]):
        self.conflicts = conflicts
        super().__init__(
            f"schemas of {flow}: nothing was written: {len(conflicts)} conflict(s) on the target: "
            + "; ".join(conflicts)
        )


@dataclass(frozen=True)
class SchemaCopy:
    """One source version and its form on the target (renamed subject and references, same id)."""

    source: SchemaVersion
    target: SchemaVersion

    @property
    def id(self) -> int:
        return self.source.id

    def line(self) -> str:
        s, t = self.source, self.target
        return f"{s.subject} v{s.version} -> {t.subject} v{t.version}  id {s.id}  {s.schema_type}" + (
            f"  refs {', '.join(f'{r.subject} v{r.version}' for r in t.references)}" if t.references else ""
        )


@dataclass
class SchemaPlan:
    copies: list[SchemaCopy] = field(default_factory=list)  # in dependency order
    present: int = 0  # versions the target already holds with their ids
    compatibility: dict[str, str] = field(default_factory=dict)  # target subject -> level to set
    target_levels: dict[str, str] = field(default_factory=dict)  # target subject -> its level there now
    orphans: list[str] = field(default_factory=list)  # target subjects from this source it no longer has
    subjects: dict[str, str] = field(default_factory=dict)  # source subject -> target subject (all copied)
    left_out: list[str] = field(default_factory=list)  # source subjects not copied, with why
    conflicts: list[str] = field(default_factory=list)

    @property
    def new_ids(self) -> list[int]:
        return sorted({c.id for c in self.copies})


def renamer(policy: DefaultReplicationPolicy, source_alias: str) -> Callable[[str], str]:
    return lambda subject: remote_subject(policy, source_alias, subject)


def plan_schemas(
    source: Catalog,
    target: Catalog,
    policy: DefaultReplicationPolicy,
    source_alias: str,
    target_alias: str,
    topic_wanted: Callable[[str], bool] = lambda topic: True,
) -> SchemaPlan:
    plan = SchemaPlan()
    rename = renamer(policy, source_alias)
    wanted = _wanted(source, policy, target_alias, topic_wanted, plan.left_out)
    held = target.by_id()
    for v in _in_dependency_order(source, wanted, plan.conflicts):
        t_subject = rename(v.subject)
        plan.subjects[v.subject] = t_subject
        mine = SchemaVersion(
            t_subject,
            v.version,
            v.id,
            v.schema,
            v.schema_type,
            tuple(Reference(r.name, rename(r.subject), r.version) for r in v.references),
        )
        there = target.version(t_subject, v.version)
        if there is not None:
            if there.id == v.id and there.same_schema(mine):
                plan.present += 1
            else:
                what = "another schema" if not there.same_schema(mine) else "the same schema"
                plan.conflicts.append(
                    f"subject {t_subject} version {v.version} on {target_alias} holds id {there.id} ({what}); "
                    f"{source_alias}'s {v.subject} version {v.version} is id {v.id}"
                )
            continue
        other = held.get(v.id)
        if other is not None and not other.same_schema(_as_subject(mine, other)):
            plan.conflicts.append(
                f"id {v.id} on {target_alias} holds another schema (subject {other.subject} version "
                f"{other.version}) than {source_alias}'s {v.subject} version {v.version}"
            )
            continue
        plan.copies.append(SchemaCopy(v, mine))
    for s_subject, t_subject in plan.subjects.items():
        if t_subject in target.compatibility:
            plan.target_levels[t_subject] = target.compatibility[t_subject]
        level = source.compatibility.get(s_subject) or source.global_compatibility
        if level and target.compatibility.get(t_subject) != level:
            plan.compatibility[t_subject] = level
    from_here = set(plan.subjects.values())
    plan.orphans = sorted(
        s for s in target.subjects if s not in from_here and subject_source(policy, s) == source_alias
    )
    return plan


def _wanted(
    source: Catalog,
    policy: DefaultReplicationPolicy,
    target_alias: str,
    topic_wanted: Callable[[str], bool],
    left_out: list[str],
) -> list[str]:
    """The source's subjects the flow copies; the others named in `left_out` with why (they came from the
    target, as MM2's cycle detection leaves topics out, or their topic is not replicated)."""
    wanted: list[str] = []
    for subject in sorted(source.subjects):
        topic = topic_of(subject)
        if subject_source(policy, subject) == target_alias:
            left_out.append(f"{subject} (it came from {target_alias})")
        elif topic is not None and not topic_wanted(topic):
            left_out.append(f"{subject} (topic {topic} is not replicated by the flow)")
        else:
            wanted.append(subject)
    return wanted


def _in_dependency_order(source: Catalog, wanted: list[str], conflicts: list[str]) -> list[SchemaVersion]:
    """The versions of the `wanted` subjects and of everything they reference, each after the earlier
    versions of its subject and after what it references (a registry refuses a reference to what it does not
    hold yet); a reference the source does not list is a conflict."""
    order: list[SchemaVersion] = []
    seen: set[tuple[str, int]] = set()

    def visit(v: SchemaVersion, path: tuple[tuple[str, int], ...]) -> None:
        key = (v.subject, v.version)
        if key in seen or key in path:
            return
        for earlier in source.subjects.get(v.subject, []):
            if earlier.version < v.version:
                visit(earlier, (*path, key))
        for ref in v.references:
            dep = source.version(ref.subject, ref.version)
            if dep is None:
                conflicts.append(
                    f"{v.subject} version {v.version} (id {v.id}) references {ref.subject} version {ref.version}, "
                    "which the source registry does not list"
                )
                continue
            visit(dep, (*path, key))
        seen.add(key)
        order.append(v)

    for subject in wanted:
        for v in source.subjects[subject]:
            visit(v, ())
    return order


def _as_subject(v: SchemaVersion, like: SchemaVersion) -> SchemaVersion:
    return SchemaVersion(like.subject, like.version, v.id, v.schema, v.schema_type, v.references)
