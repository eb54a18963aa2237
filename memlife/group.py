"""Subject groups and what is inside them: duplicates of the survivor, contradicted statements.

A group is one actor + namespace + subject, never more (Group refuses otherwise).
Inside a group, records cluster into *statements*:
  - exact duplicates (same content sha256) and normalised duplicates (same text once
    case and punctuation are folded) always share a cluster;
  - near duplicates join when their cosine >= policy.grouping.near_duplicate_cosine AND
    their polarity agrees: "is allergic to peanuts" / "is not allergic to peanuts" score
    0.94, so similarity alone would merge a statement with its own contradiction.
The survivor is the planner's (``group.survivor_id``) or else the best record by
(source weight, created_at). Every other record is then either a duplicate of the
survivor (same cluster), contradicted (a different statement, older than the survivor
or of opposite polarity), or conflicting (a different, newer statement from a weaker
source: a reviewer decides, nothing is superseded). Episodic groups hold distinct
events, not contradictions: callers use only ``duplicates`` there.
Groups larger than policy.grouping.max_group_size are split oldest-first, so one model
call stays small; the survivor stays in the newest chunk.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from memlife.consolidate.base import DEFAULT_SOURCE_WEIGHTS, Group, pick_survivor
from memlife.model import MemoryRecord, Source, Status, content_sha256
from memlife.policy import Grouping, Policy
from memlife.text import negates, normalise

__all__ = [
    "DEFAULT_SOURCE_WEIGHTS",
    "GroupAnalysis",
    "analyse_group",
    "build_groups",
    "cluster_group",
    "pick_survivor",
    "split_group",
]


def _age(r: MemoryRecord) -> tuple:
    return (r.created_at, r.id)


class _Union:
    def __init__(self, n: int):
        self.parent = list(range(n))

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def join(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def cluster_group(
    group: Group,
    vectors: np.ndarray | None = None,
    *,
    threshold: float = Grouping().near_duplicate_cosine,
) -> list[list[str]]:
    """Ids clustered by statement; clusters ordered by their newest member, members oldest first.

    ``vectors`` are L2-normalised rows aligned with ``group.records`` (from
    EmbeddingCache.get_or_embed); without them only exact/normalised duplicates join.
    """
    recs = group.records
    if vectors is not None and len(vectors) != len(recs):
        raise ValueError(f"{len(vectors)} vectors for {len(recs)} records")
    uf = _Union(len(recs))
    first: dict[str, int] = {}
    for i, r in enumerate(recs):
        for key in (f"sha:{content_sha256(r.content)}", f"norm:{normalise(r.content)}"):
            if key in first:
                uf.join(first[key], i)
            else:
                first[key] = i
    if vectors is not None and len(recs) > 1:
        neg = np.array([negates(r.content) for r in recs])
        close = (vectors @ vectors.T >= threshold) & (neg[:, None] == neg[None, :])
        for i, j in zip(*np.nonzero(np.triu(close, k=1)), strict=True):
            uf.join(int(i), int(j))
    members: dict[int, list[MemoryRecord]] = defaultdict(list)
    for i, r in enumerate(recs):
        members[uf.find(i)].append(r)
    clusters = [sorted(c, key=_age) for c in members.values()]
    clusters.sort(key=lambda c: _age(c[-1]))
    return [[r.id for r in c] for c in clusters]


@dataclass(frozen=True)
class GroupAnalysis:
    """What the executor needs to know about one group; ids only."""

    survivor_id: str
    clusters: list[list[str]]
    duplicates: list[str]  # same statement as the survivor (survivor excluded)
    exact_duplicates: list[str]  # the subset with the survivor's exact content
    contradicted: list[str]  # a different statement the survivor supersedes
    polarity_flips: list[str]  # contradicted, with the opposite polarity to the survivor
    conflicting: list[str]  # a different, newer statement from a weaker source: review

    def role(self, record_id: str) -> str:
        """'survivor', 'duplicate', 'contradicted' or 'conflicting'."""
        if record_id == self.survivor_id:
            return "survivor"
        for role, ids in (
            ("duplicate", self.duplicates),
            ("contradicted", self.contradicted),
            ("conflicting", self.conflicting),
        ):
            if record_id in ids:
                return role
        raise KeyError(record_id)


def analyse_group(
    group: Group,
    vectors: np.ndarray | None = None,
    *,
    grouping: Grouping | None = None,
    weights: Mapping[Source, float] = DEFAULT_SOURCE_WEIGHTS,
) -> GroupAnalysis:
    grouping = grouping or Grouping()
    clusters = cluster_group(group, vectors, threshold=grouping.near_duplicate_cosine)
    by_id = {r.id: r for r in group.records}
    survivor = pick_survivor(group, weights)
    home = next(c for c in clusters if survivor.id in c)
    sha = content_sha256(survivor.content)
    duplicates = [i for i in home if i != survivor.id]
    contradicted: list[str] = []
    flips: list[str] = []
    conflicting: list[str] = []
    for c in clusters:
        if c is home:
            continue
        for i in c:
            r = by_id[i]
            # The survivor is the best by (weight, time), so a newer different statement
            # is from a weaker source: it conflicts (review), it is not superseded.
            if _age(r) < _age(survivor):
                contradicted.append(i)
                if negates(r.content) != negates(survivor.content):
                    flips.append(i)
            else:
                conflicting.append(i)
    return GroupAnalysis(
        survivor_id=survivor.id,
        clusters=clusters,
        duplicates=duplicates,
        exact_duplicates=[i for i in duplicates if content_sha256(by_id[i].content) == sha],
        contradicted=contradicted,
        polarity_flips=flips,
        conflicting=conflicting,
    )


def split_group(group: Group, max_size: int) -> list[Group]:
    """Chunks of at most ``max_size`` records, oldest first; deterministic.

    The survivor (and so the planner's verdict) stays with the newest chunk; older
    chunks carry no survivor and only their own superseded ids.
    """
    if max_size < 2:
        raise ValueError("max_size must be >= 2")
    if len(group.records) <= max_size:
        return [group]
    recs = sorted(group.records, key=_age)
    if group.survivor_id is not None:  # keep the survivor in the last chunk
        recs = [r for r in recs if r.id != group.survivor_id] + [
            r for r in recs if r.id == group.survivor_id
        ]
    chunks = [recs[i : i + max_size] for i in range(0, len(recs), max_size)]
    if len(chunks[-1]) < 2:  # a lone survivor cannot consolidate: borrow one record
        chunks[-1].insert(0, chunks[-2].pop())
    out = []
    for chunk in chunks:
        ids = {r.id for r in chunk}
        out.append(
            replace(
                group,
                records=chunk,
                survivor_id=group.survivor_id if group.survivor_id in ids else None,
                superseded_ids=[i for i in group.superseded_ids if i in ids],
            )
        )
    return out


def build_groups(
    records: Iterable[MemoryRecord],
    *,
    policy: Policy | None = None,
    decisions: Sequence[object] | None = None,
) -> list[Group]:
    """Groups of 2+ active records per actor + namespace + subject, split to max size.

    With planner ``decisions`` (memlife.plan.Decision) only consolidate/supersede
    candidates are grouped, under the planner's group key, survivor and superseded
    ids: expired, held, retained and reviewed records never reach a model.
    """
    from memlife.plan import Action, group_key

    max_size = (policy.grouping if policy else Grouping()).max_group_size
    wanted: dict[str, object] | None = None
    if decisions is not None:
        wanted = {
            d.id: d  # type: ignore[attr-defined]
            for d in decisions
            if d.action in (Action.consolidate_candidate, Action.supersede_candidate)  # type: ignore[attr-defined]
        }
    buckets: dict[str, list[MemoryRecord]] = defaultdict(list)
    for r in records:
        if r.status is not Status.active or not (r.subject and r.subject.strip()):
            continue
        if wanted is not None and r.id not in wanted:
            continue
        buckets[group_key(r.actor_id, r.namespace, r.subject, r.memory_type)].append(r)
    groups: list[Group] = []
    for key in sorted(buckets):
        members = sorted(buckets[key], key=_age)
        if len(members) < 2:
            continue
        survivor, superseded = None, []
        if wanted is not None:
            ds = [wanted[r.id] for r in members]
            survivor = next((d.survivor for d in ds if d.survivor), None)  # type: ignore[attr-defined]
            superseded = [d.id for d in ds if d.action is Action.supersede_candidate]  # type: ignore[attr-defined]
        first = members[0]
        g = Group(
            key=key,
            actor_id=first.actor_id,
            namespace=first.namespace,
            subject=first.subject or "",
            records=members,
            survivor_id=survivor,
            superseded_ids=superseded,
        )
        groups.extend(split_group(g, max_size))
    return groups
