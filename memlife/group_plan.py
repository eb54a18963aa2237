"""The decision for one consolidation group, made in one place: survivor, roles, what is
superseded and why, and which records the model sees. The executor (apply/groups.py) only
reads the records, calls the consolidator on ``to_model`` and writes what this says.

Input is one :class:`Member` per record (ids, hashes, times: no content), so a group of
50k records costs a few MB; vectors are per distinct *statement* (normalised text), not
per record. Statements cluster by leader: each statement, oldest first, joins the most
similar leader of the same polarity at ``near_duplicate_cosine`` or leads a new cluster;
at most ``MAX_LEADERS`` leaders (a statement beyond that stays alone: a missed merge, never
a wrong one). Time is O(statements x leaders), memory O(leaders x dim): never N x N.

Rules (DESIGN step 6, formerly spread over plan.py, consolidate/base.py, group.py and
apply.py):
  - survivor: the planner's (``planner_survivor``) when it is a member, else the best by
    (source weight, created_at, id);
  - same cluster as the survivor: EXACT_DUPLICATE (same content) or NEAR_DUPLICATE;
  - another cluster, older than the survivor: CONTRADICTION (superseded by the newer
    statement), except in episodic groups, where distinct events are kept; said at the
    survivor's instant, only by a weaker source (one instant, one authority: conflicting);
  - another cluster, newer than the survivor: conflicting (a weaker source said something
    newer): kept for review, never superseded;
  - fewer than two records with a role: nothing to merge;
  - an episodic statement repeated ``episodic_to_semantic_min`` times is ``promote``d: the
    model writes it as one semantic record (offline the repeats merge and stay episodic:
    a verbatim copy of an event is no lasting fact);
  - the model sees at most ``max_group_size`` records, the survivor and the newest others;
    beyond the cap, copies of a text it sees (same content) are superseded by the same
    replacement (``over_cap``); the other older records wait for a later night, when the
    model reads them beside this night's replacement (a label alone retires no fact).
    Offline (``merge_unread``: the extractive consolidator reads no text) the rules merge
    them all.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

import numpy as np

from memlife.model import MemoryRecord, MemoryType, RetentionClass, Source
from memlife.policy import Grouping
from memlife.text import negates, norm_sha256

# a group's members (each superseded) with its write fit one DynamoDB TransactWriteItems
# (100 items: memlife/journal/dynamodb.TRANSACT_MAX), so a night stopped part way never
# journals a write without its supersedes
MAX_MEMBERS = 99
MAX_LEADERS = 4096  # statement clusters compared against: memory MAX_LEADERS x dim floats

SURVIVOR = "SURVIVOR"
EXACT_DUPLICATE = "EXACT_DUPLICATE"
NEAR_DUPLICATE = "NEAR_DUPLICATE"
CONTRADICTION = "CONTRADICTION"


@dataclass(frozen=True, slots=True)
class Member:
    """What the group decision needs of one record (and the replacement's aggregates)."""

    id: str
    sha: str  # content sha256
    statement: str  # sha256 of the normalised text: restatements share it
    negated: bool
    created_at: datetime
    source: Source
    subject: str
    memory_type: MemoryType
    owner: str | None
    retention_class: RetentionClass
    access_count: int
    last_accessed_at: datetime | None
    last_verified_at: datetime | None
    expires_at: datetime | None

    @classmethod
    def of(cls, r: MemoryRecord) -> Member:
        return cls(
            r.id, r.sha256, norm_sha256(r.content), negates(r.content), r.created_at, r.source,
            r.subject or "", r.memory_type, r.owner, r.retention_class, r.access_count,
            r.last_accessed_at, r.last_verified_at, r.expires_at,
        )  # fmt: skip

    @property
    def age(self) -> tuple[datetime, str]:
        return (self.created_at, self.id)


@dataclass(frozen=True)
class GroupPlan:
    """One group's decision: ids, roles and counts only."""

    survivor_id: str
    members: list[Member]  # the records the replacement supersedes, oldest first
    roles: dict[str, str]  # id -> SURVIVOR / EXACT_DUPLICATE / NEAR_DUPLICATE / CONTRADICTION
    to_model: list[str]  # ids the consolidator sees (<= max_group_size), oldest first
    contradicted_to_model: list[str]  # of those, the ones the survivor supersedes
    conflicting: list[str] = field(default_factory=list)  # newer, weaker: review
    over_cap: int = 0  # copies of a text shown, superseded with it unshown
    # an episodic statement said at least grouping.episodic_to_semantic_min times: with a
    # model the replacement is one semantic record (the recurring fact), not another event
    promote: bool = False

    @property
    def ids(self) -> list[str]:
        return [m.id for m in self.members]


class _Hashed(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def sha(self) -> str: ...


class _Rankable(Protocol):
    """What the survivor rule reads: a Member or a MemoryRecord."""

    @property
    def id(self) -> str: ...
    @property
    def source(self) -> Source: ...
    @property
    def created_at(self) -> datetime: ...


def consolidation_key(
    actor_id: str,
    namespace: str,
    subject: str,
    members: Iterable[_Hashed],
    secret: bytes | None = None,
) -> str:
    """Deterministic over members and content (``Group.consolidation_key``'s formula).

    ``secret`` (the store's run secret): keyed, as evidence's content hashes are
    (memlife/evidence_key.py). A replacement's id is made from this key and goes wherever
    ids go (receipts, the dataset, reports, the ledger), erasures included: unkeyed, it
    gave the members' texts back to whoever guessed them (audit 50c). Still deterministic
    for the store, so a rerun finds the replacement it planned."""
    parts = sorted(f"{m.id}:{m.sha}" for m in members)
    raw = "\x1f".join([actor_id, namespace, subject, *parts]).encode()
    if secret is not None:
        return hmac.new(secret, raw, hashlib.sha256).hexdigest()
    return hashlib.sha256(raw).hexdigest()


def cluster_statements(
    statements: Sequence[tuple[str, bool]],
    vectors: Callable[[Sequence[str]], np.ndarray] | None,
    threshold: float,
    chunk: int = 512,
) -> dict[str, int]:
    """Statement key -> cluster (leader) number. ``statements``: (key, negated), oldest
    first; ``vectors(keys)`` gives their L2-normalised rows, asked ``chunk`` at a time."""
    out: dict[str, int] = {}
    if vectors is None:
        return {k: i for i, (k, _) in enumerate(statements)}
    leaders: np.ndarray | None = None
    # as many rows as there can be leaders (a group of 3 statements allocates 3, not 4096)
    rows = min(MAX_LEADERS, len(statements))
    polarity = np.zeros(rows, dtype=bool)
    n = 0
    for start in range(0, len(statements), chunk):
        part = statements[start : start + chunk]
        vecs = vectors([k for k, _ in part])
        if leaders is None:
            leaders = np.empty((rows, vecs.shape[1]), dtype=np.float32)
        for (k, neg), v in zip(part, vecs, strict=True):
            best = -1
            if n:
                sims = leaders[:n] @ v
                sims[polarity[:n] != neg] = -np.inf
                j = int(sims.argmax())
                if sims[j] >= threshold:
                    best = j
            if best < 0:
                if n < MAX_LEADERS:
                    leaders[n] = v
                    polarity[n] = neg
                    best, n = n, n + 1
                else:
                    best = MAX_LEADERS + len(out)  # alone: no more leaders are kept
            out[k] = best
    return out


def survivor_rank(
    weights: Mapping[Source, float],
) -> Callable[[_Rankable], tuple[float, datetime, str]]:
    """The one survivor rule without a planner's choice: source weight, then time, then id
    (for Members and MemoryRecords alike; consolidate/base.pick_survivor uses it too)."""
    return lambda m: (weights[m.source], m.created_at, m.id)


def pick_survivor(
    members: Sequence[Member], weights: Mapping[Source, float], planner_survivor: str | None
) -> Member:
    """The planner's survivor when it is a member, else the best by :func:`survivor_rank`."""
    for m in members:
        if m.id == planner_survivor:
            return m
    return max(members, key=survivor_rank(weights))


def _older(m: Member, survivor: Member, weights: Mapping[Source, float]) -> bool:
    """Whether ``m`` said its statement before the survivor: strictly earlier, or at the
    same instant from a weaker source. Two statements of one instant and one authority say
    nothing about which is current: the other is conflicting (kept, for review), never
    superseded by whichever id sorts first (as the planner's tie, plan.py)."""
    if m.created_at != survivor.created_at:
        return m.created_at < survivor.created_at
    return weights[m.source] < weights[survivor.source]


def plan_group(
    members: Sequence[Member],
    vectors: Callable[[Sequence[str]], np.ndarray] | None,
    *,
    grouping: Grouping,
    weights: Mapping[Source, float],
    planner_survivor: str | None = None,
    merge_unread: bool = False,
) -> GroupPlan | None:
    """The group's decision, or None when fewer than two records would merge.
    ``merge_unread``: records past the cap are merged by the rules alone (the extractive
    consolidator, which judges no text); else only copies of a text the model reads."""
    if len(members) < 2:
        return None
    members = sorted(members, key=lambda m: m.age)
    first: dict[str, Member] = {}
    for m in members:
        first.setdefault(m.statement, m)
    statements = [(k, m.negated) for k, m in first.items()]
    cluster = cluster_statements(statements, vectors, grouping.near_duplicate_cosine)
    survivor = pick_survivor(members, weights, planner_survivor)
    home = cluster[survivor.statement]
    episodic = survivor.memory_type is MemoryType.episodic
    roles: dict[str, str] = {survivor.id: SURVIVOR}
    contradicted: set[str] = set()
    conflicting: list[str] = []
    for m in members:
        if m.id == survivor.id:
            continue
        if cluster[m.statement] == home:
            roles[m.id] = EXACT_DUPLICATE if m.sha == survivor.sha else NEAR_DUPLICATE
        elif _older(m, survivor, weights):
            if not episodic:  # distinct events never contradict
                roles[m.id] = CONTRADICTION
                contradicted.add(m.id)
        else:
            conflicting.append(m.id)
    if len(roles) < 2:
        return GroupPlan(survivor.id, [], {}, [], [], conflicting)
    # the write and its supersedes are journaled in one transaction (DynamoDB takes 100
    # items): the oldest members past it wait for the next night, merged then with this
    # night's replacement
    others = [m.id for m in members if m.id in roles and m.id != survivor.id]  # oldest first
    others = others[-(MAX_MEMBERS - 1) :]
    cap = grouping.max_group_size
    sent = set(others[-(cap - 1) :]) | {survivor.id}
    # past the cap, only a copy of a text the model reads (its answer's checks covered that
    # text) is merged tonight; any other waits, read on a later night beside this night's
    # replacement: a planner's label alone retires no fact (coverage.retired; audit 53c:
    # "severely allergic to peanuts and carry an EpiPen" went unread into "allergic to
    # peanuts"). ``merge_unread``: offline, where no merge reads a member's text anyway
    keep = {*others, survivor.id}
    if not merge_unread:
        read = {m.sha for m in members if m.id in sent}
        keep = {m.id for m in members if m.id in sent or (m.id in keep and m.sha in read)}
    roles = {i: role for i, role in roles.items() if i in keep}
    kept = [m for m in members if m.id in roles]
    to_model = [m.id for m in kept if m.id in sent]
    return GroupPlan(
        survivor_id=survivor.id,
        members=kept,
        roles=roles,
        to_model=to_model,
        contradicted_to_model=[i for i in to_model if i in contradicted],
        conflicting=conflicting,
        over_cap=len(kept) - len(to_model),
        promote=episodic and len(kept) >= grouping.episodic_to_semantic_min,
    )
