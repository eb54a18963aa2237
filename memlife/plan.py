"""The decision for each record: exactly one action plus reason codes. Pure: no I/O.

Precedence, highest first (a newcomer should find every rule here):
  1. legal hold           -> hold (an expired held record records DELETE_DEFERRED)
  2. hard expiry / TTL     -> delete_expired (no score computed, no model call)
  3. pending_delete past grace -> delete_pending
  4. superseded / quarantined -> retain (already handled; never regrouped)
  5. subject groups (2+ active records on one actor+namespace+subject):
       exact or normalised duplicate        -> consolidate_candidate
       older statement, newer one at least as authoritative (semantic)
                                            -> supersede_candidate (CONTRADICTION or NEWER_STATEMENT)
       newer statement from a weaker source -> review (CONFLICTING_SOURCE)
       differing procedures                 -> review (strictest gate: a human decides)
       the newest statement of a group      -> consolidate_candidate
  6. missing owner, stale verification, low score -> review
  7. otherwise -> retain
A low score alone never deletes; procedural records are never deleted by score.
Groups never cross an actor or a namespace: planning works one shard at a time.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from memlife.model import FUTURE_SKEW, MemoryType, PlanView, RetentionClass, Source, Status
from memlife.policy import Policy
from memlife.score import Scorer


class Action(StrEnum):
    retain = "retain"
    hold = "hold"
    delete_expired = "delete_expired"
    delete_pending = "delete_pending"
    review = "review"
    consolidate_candidate = "consolidate_candidate"
    supersede_candidate = "supersede_candidate"


class Reason(StrEnum):
    LEGAL_HOLD = "LEGAL_HOLD"
    DELETE_DEFERRED = "DELETE_DEFERRED"  # would be deleted but a hold defers it
    RETAINED_STATUS = "RETAINED_STATUS"
    HARD_EXPIRED = "HARD_EXPIRED"
    TTL_EXPIRED = "TTL_EXPIRED"  # the type's default TTL, for records without expires_at
    GRACE_ELAPSED = "GRACE_ELAPSED"
    PENDING_GRACE = "PENDING_GRACE"
    ALREADY_SUPERSEDED = "ALREADY_SUPERSEDED"
    QUARANTINED = "QUARANTINED"
    MISSING_OWNER = "MISSING_OWNER"
    STALE_VERIFICATION = "STALE_VERIFICATION"
    LOW_SCORE = "LOW_SCORE"
    SAME_SUBJECT = "SAME_SUBJECT"
    EXACT_DUPLICATE = "EXACT_DUPLICATE"
    NEAR_DUPLICATE = "NEAR_DUPLICATE"
    CONTRADICTION = "CONTRADICTION"
    NEWER_STATEMENT = "NEWER_STATEMENT"
    CONFLICTING_SOURCE = "CONFLICTING_SOURCE"
    SCORE_OK = "SCORE_OK"


DELETE_ACTIONS = frozenset({Action.delete_expired, Action.delete_pending})


_DAY = 86400.0


@dataclass(slots=True)
class Decision:
    id: str
    actor_id: str
    namespace: str
    action: Action
    reasons: list[Reason]
    score: float | None = None
    group: str | None = None  # hash of actor+namespace+subject; no content
    survivor: str | None = None  # for supersede candidates: the newer statement's id
    content_sha256: str | None = None  # for receipts (a hash, never content)

    def report_row(self) -> dict:
        return {
            "id": self.id,
            "actor_id": self.actor_id,
            "namespace": self.namespace,
            "action": str(self.action),
            "reasons": [str(r) for r in self.reasons],
            "score": None if self.score is None else round(self.score, 6),
        }


def group_key(actor_id: str, namespace: str, subject: str, memory_type: str = "semantic") -> str:
    """One group per actor + namespace + subject + memory type (a fact never merges a procedure)."""
    raw = f"{actor_id}\x1f{namespace}\x1f{subject.strip().lower()}\x1f{memory_type}".encode()
    return hashlib.sha256(raw).hexdigest()[:24]


@dataclass
class _GroupOutcome:
    action: Action
    reasons: list[Reason]
    contradicted: bool = False
    survivor: str | None = None


@dataclass
class Planner:
    policy: Policy
    now: datetime
    scorer: Scorer = field(init=False)

    def __post_init__(self) -> None:
        self.scorer = Scorer(self.policy)
        self._now = self.now.timestamp()
        self._grace = self.policy.pending_delete_grace_days * _DAY
        self._ttl = {
            mt: (tp.default_ttl_days * _DAY if tp.default_ttl_days else None)
            for mt, tp in self.policy.memory_types.items()
        }
        self._low = {mt: tp.low_score for mt, tp in self.policy.memory_types.items()}
        # verified before this instant = stale (None: the type has no staleness limit)
        self._stale_before = {
            mt: (
                self._now - tp.verification_stale_days * _DAY
                if tp.verification_stale_days
                else None
            )
            for mt, tp in self.policy.memory_types.items()
        }

    # -- one record, no context ------------------------------------------------------------
    def expired(self, r: PlanView) -> Reason | None:
        if r.expires is not None:
            return Reason.HARD_EXPIRED if r.expires <= self._now else None
        ttl = self._ttl[r.memory_type]
        if ttl is not None and r.created + ttl <= self._now:
            return Reason.TTL_EXPIRED
        return None

    def _early(self, r: PlanView) -> Decision | None:
        """Decisions that need no score and no group (steps 1-4)."""
        if r.status == "active" and r.retention_class != "legal_hold":
            # the common case (active, not held, not expired) decided without building anything
            if r.expires is None:
                ttl = self._ttl[r.memory_type]
                if ttl is None or r.created + ttl > self._now:
                    return None
            elif r.expires > self._now:
                return None
        d = lambda action, *reasons: Decision(
            r.id, r.actor_id, r.namespace, action, list(reasons), content_sha256=r.content_sha256
        )
        expiry = self.expired(r)
        if r.retention_class == RetentionClass.legal_hold:
            if expiry:
                return d(Action.hold, Reason.LEGAL_HOLD, expiry, Reason.DELETE_DEFERRED)
            return d(Action.hold, Reason.LEGAL_HOLD)
        if r.status == Status.retained:
            return d(Action.hold, Reason.RETAINED_STATUS)
        if expiry:
            return d(Action.delete_expired, expiry)
        if r.status == Status.pending_delete:
            changed = r.status_changed or r.created
            if changed + self._grace <= self._now:
                return d(Action.delete_pending, Reason.GRACE_ELAPSED)
            return d(Action.retain, Reason.PENDING_GRACE)
        if r.status == Status.superseded:
            return d(Action.retain, Reason.ALREADY_SUPERSEDED)
        if r.status == Status.quarantined:
            return d(Action.retain, Reason.QUARANTINED)
        return None

    # -- one subject group ---------------------------------------------------------------
    def _group(self, members: list[PlanView]) -> dict[str, _GroupOutcome]:
        w = self.policy.source_weights
        # a statement dated after the cutoff (+ skew) ranks below every genuine one: never wins
        future = self._now + FUTURE_SKEW.total_seconds()
        rank = lambda r: (r.created <= future, r.created, w[r.source], r.id)
        # Clusters of the same statement (identical once normalised), oldest cluster first.
        clusters: dict[str, list[PlanView]] = defaultdict(list)
        for r in sorted(members, key=rank):
            clusters[r.norm_sha256].append(r)
        ordered = sorted(clusters.values(), key=lambda c: rank(c[-1]))
        head_cluster, head = ordered[-1], ordered[-1][-1]
        out: dict[str, _GroupOutcome] = {}

        def mark(c: list[PlanView], action: Action, why: list[Reason], **kw: object) -> None:
            dup = []
            if len(c) > 1:
                exact = len({r.content_sha256 for r in c}) == 1
                dup = [Reason.EXACT_DUPLICATE if exact else Reason.NEAR_DUPLICATE]
            for r in c:
                out[r.id] = _GroupOutcome(action, [Reason.SAME_SUBJECT, *why, *dup], **kw)  # type: ignore[arg-type]

        if len(ordered) == 1:  # one statement, said more than once
            mark(head_cluster, Action.consolidate_candidate, [])
            return out
        if head.memory_type == MemoryType.episodic:
            # distinct events are not contradictions; only repeated ones consolidate
            for c in ordered:
                if len(c) > 1:
                    mark(c, Action.consolidate_candidate, [])
            return out
        if head.memory_type == MemoryType.procedural:
            # differing procedures: strictest gate, a reviewer decides
            for c in ordered:
                mark(c, Action.review, [Reason.CONTRADICTION], contradicted=c is not head_cluster)
            return out
        strong_head = head.source != Source.agent_inferred
        superseded_any = False
        for c in ordered[:-1]:
            if strong_head and w[head.source] >= max(w[r.source] for r in c):
                why = (
                    Reason.CONTRADICTION
                    if c[-1].negated != head.negated
                    else Reason.NEWER_STATEMENT
                )
                mark(c, Action.supersede_candidate, [why], contradicted=True, survivor=head.id)
                superseded_any = True
            else:
                mark(c, Action.review, [Reason.CONFLICTING_SOURCE])
        if superseded_any:
            mark(head_cluster, Action.consolidate_candidate, [])
        else:
            mark(head_cluster, Action.review, [Reason.CONFLICTING_SOURCE])
        return out

    # -- one shard (actor + namespace) -------------------------------------------------------
    def plan_shard(self, pages: Iterable[list[PlanView]]) -> list[Decision]:
        """Every record of one actor/namespace, streamed page by page, gets one decision."""
        decisions: list[Decision] = []
        live: list[PlanView] = []
        by_subject: dict[str, list[PlanView]] = defaultdict(list)
        now, ttl = self._now, self._ttl
        for page in pages:
            for r in page:
                # Inline fast path (most records): active, not held, not expired -> live.
                fast = r.status == "active" and r.retention_class != "legal_hold"
                if fast:
                    if r.expires is None:
                        t = ttl[r.memory_type]
                        fast = t is None or r.created + t > now
                    else:
                        fast = r.expires > now
                if not fast:
                    early = self._early(r)
                    if early is not None:
                        decisions.append(early)
                        continue
                live.append(r)
                if r.subject:
                    # one group per subject AND memory type: a fact never supersedes a procedure
                    by_subject[f"{r.subject.strip().lower()}\x1f{r.memory_type}"].append(r)
        outcomes: dict[str, _GroupOutcome] = {}
        groups: dict[str, str] = {}
        for bucket, members in by_subject.items():
            if len(members) < 2:
                continue
            head = members[0]
            key = group_key(
                head.actor_id, head.namespace, bucket.split("\x1f")[0], head.memory_type
            )
            for rid, outcome in self._group(members).items():
                outcomes[rid] = outcome
                groups[rid] = key
        scorer, now, stale_before = self.scorer, self._now, self._stale_before
        score_of = scorer.score
        for r in live:
            g = outcomes.get(r.id)
            score = score_of(r, now, g is not None and g.contradicted)
            review: list[Reason] = []
            if not (r.owner and r.owner.strip()):
                review.append(Reason.MISSING_OWNER)
            limit = stale_before[r.memory_type]
            if limit is not None and (r.last_verified is None or r.last_verified < limit):
                review.append(Reason.STALE_VERIFICATION)
            if score < self._low[r.memory_type]:
                review.append(Reason.LOW_SCORE)
            if g is not None:
                d = Decision(
                    r.id,
                    r.actor_id,
                    r.namespace,
                    g.action,
                    g.reasons + review,
                    score,
                    groups[r.id],
                    g.survivor,
                    r.content_sha256,
                )
            elif review:
                d = Decision(
                    r.id,
                    r.actor_id,
                    r.namespace,
                    Action.review,
                    review,
                    score,
                    content_sha256=r.content_sha256,
                )
            else:
                d = Decision(
                    r.id,
                    r.actor_id,
                    r.namespace,
                    Action.retain,
                    [Reason.SCORE_OK],
                    score,
                    content_sha256=r.content_sha256,
                )
            decisions.append(d)
        return decisions
