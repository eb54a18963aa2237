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

Records without a subject get one inferred here (:func:`infer_subjects`): a leader
clustering over their embeddings (time order; a record joins the closest leader at
``policy.inference.topic_cosine`` or leads a new subject named by its keywords). Inside an
inferred subject, near duplicates share a statement key and a probable update (a newer,
related statement with an update cue: "now", "gave up", "moved", a polarity flip) is
reported as an (older, newer) pair: the planner merges the former and sends the latter to
review (or to the model). Every neighbour search is blocked: at most ``_BLOCK`` rows
against one subject's members at a time, never an N x N matrix.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from memlife.consolidate.base import DEFAULT_SOURCE_WEIGHTS, Group, pick_survivor
from memlife.model import MemoryRecord, Source, Status, content_sha256
from memlife.policy import Grouping, InferencePolicy, Policy
from memlife.text import _UPDATE_CUE, negates, normalise, reads_additive

__all__ = [
    "DEFAULT_SOURCE_WEIGHTS", "GroupAnalysis", "SubjectInference", "analyse_group",
    "build_groups", "cluster_group", "infer_subjects", "pick_survivor", "split_group",
]  # fmt: skip


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
        for i, j in _near_pairs(vectors, neg, threshold):
            uf.join(i, j)
    members: dict[int, list[MemoryRecord]] = defaultdict(list)
    for i, r in enumerate(recs):
        members[uf.find(i)].append(r)
    clusters = [sorted(c, key=_age) for c in members.values()]
    clusters.sort(key=lambda c: _age(c[-1]))
    return [[r.id for r in c] for c in clusters]


_BLOCK = 256  # rows compared at a time: memory is _BLOCK x n floats, never n x n


def _near_pairs(
    vectors: np.ndarray, neg: np.ndarray, threshold: float
) -> Iterable[tuple[int, int]]:
    """(i, j), j < i: j is i's closest earlier row of the same polarity at >= threshold.

    One edge per row (its nearest earlier neighbour) joins the same components as
    single linkage over near-duplicate chains in practice, in O(n) edges and
    O(_BLOCK * n) memory: 50k copies of one sentence must not build 50k x 50k.
    """
    n = len(vectors)
    for start in range(1, n, _BLOCK):
        stop = min(n, start + _BLOCK)
        sims = vectors[start:stop] @ vectors[:stop].T  # rows start..stop against 0..stop
        rows = np.arange(start, stop)
        earlier = np.arange(stop)[None, :] < rows[:, None]
        sims = np.where(earlier & (neg[:stop][None, :] == neg[rows][:, None]), sims, -np.inf)
        best = np.argmax(sims, axis=1)
        val = sims[np.arange(stop - start), best]
        for k in np.flatnonzero(val >= threshold):
            yield int(rows[k]), int(best[k])


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


# -- subjects inferred from embeddings ---------------------------------------------------------
_TOKEN = re.compile(r"[a-z]+")
_STOP = frozenset(
    """a about above after again against all am an and any are as at be because been
before being below between both but by can did do does doing down during each few for from
further had has have having he her here hers herself him himself his how i if in into is it its
itself just me more most my myself no nor not now of off on once only or other our ours
ourselves out over own same she should so some such than that the their theirs them themselves
then there these they this those through to too under until up very was we were what when where
which while who whom why will with would you your yours yourself yourselves also really likes
like said says told wants want got get gets going went one two lot lots much many every
morning day days time don doesn didn isn wasn aren""".split()
)


def looks_like_update(newer: str, older: str) -> bool:
    """Offline cue for "newer replaces older": an update word or a polarity flip, and no
    purely additive wording ("also allergic to shellfish" complements, it does not replace)."""
    cue = _UPDATE_CUE.search(newer) is not None or negates(newer) != negates(older)
    return cue and not reads_additive(newer) and shared_content_word(newer, older)


def _statement_leaders(
    vecs: np.ndarray, items: Sequence[InferenceItem], threshold: float
) -> np.ndarray:
    """For each row, the index of the first row of its statement (leader clustering, time
    order, blocked: a block of rows against the leaders so far, then within the block)."""
    from memlife.consolidate.grounding import specifics

    n = len(items)
    root = np.arange(n)
    leaders: list[int] = []
    by_norm: dict[str, int] = {}
    spec = [frozenset(specifics(it.text)) for it in items]
    for start in range(0, n, _BLOCK):
        stop = min(n, start + _BLOCK)
        lead_arr = np.array(leaders, dtype=np.int64)
        sims = vecs[start:stop] @ vecs[lead_arr].T if len(leaders) else np.zeros((stop - start, 0))
        for r, k in enumerate(range(start, stop)):
            it = items[k]
            if it.norm_sha256 in by_norm:
                root[k] = by_norm[it.norm_sha256]
                continue
            cand = [
                (float(sims[r, j]), int(lead_arr[j])) for j in np.flatnonzero(sims[r] >= threshold)
            ]
            fresh = [j for j in leaders[len(lead_arr) :]]  # leaders made inside this block
            if fresh:
                within = vecs[fresh] @ vecs[k]
                cand += [(float(within[m]), fresh[m]) for m in np.flatnonzero(within >= threshold)]
            cand = [
                (c, j) for c, j in cand if items[j].negated == it.negated and spec[j] == spec[k]
            ]
            if cand:
                root[k] = max(cand)[1]
            else:
                leaders.append(k)
                by_norm[it.norm_sha256] = k
    return root


def shared_content_word(newer: str, older: str) -> bool:
    """Both texts use one lower-case content word (names are left out: in an agent's notes
    about one person every sentence shares the name)."""
    return bool(_content_words(newer) & _content_words(older))


def _content_words(text: str) -> set[str]:
    out = set()
    for w in re.findall(r"[A-Za-z]+", text):
        if w[0].isupper():
            continue
        w = w.lower()
        if len(w) > 2 and w not in _STOP:
            out.add(w[:-1] if w.endswith("s") and len(w) > 4 else w)
    return out


def subject_keywords(text: str, n: int = 3) -> str:
    """The first ``n`` content words of a text, for a human reading the review list."""
    words = [w for w in _TOKEN.findall(text.lower()) if w not in _STOP and len(w) > 2]
    return " ".join(list(dict.fromkeys(words))[:n]) or "misc"


@dataclass(frozen=True)
class InferenceItem:
    """One record without a subject, as inference needs it (content stays with the caller)."""

    id: str
    text: str
    created: float
    norm_sha256: str
    negated: bool


@dataclass
class SubjectInference:
    subjects: dict[str, str]  # id -> inferred subject key (known ones included)
    new: dict[str, str]  # the subset assigned now (to be stored as inferred)
    statements: dict[str, str]  # id -> statement key, for records with a near duplicate
    updates: dict[str, str]  # older id -> newer id (a probable update)


def infer_subjects(
    items: Sequence[InferenceItem],
    vectors: np.ndarray,
    *,
    known: Mapping[str, str] | None = None,
    inference: InferencePolicy | None = None,
    near_duplicate: float = Grouping().near_duplicate_cosine,
) -> SubjectInference:
    """Inferred subjects, statement keys and probable updates for one shard's records.

    ``vectors`` are L2-normalised rows aligned with ``items``; ``known`` are subjects
    inferred on earlier nights or at remember time (kept: a key never moves).
    Deterministic for the same input; memory O(n + leaders + _BLOCK * group size).
    """
    if len(vectors) != len(items):
        raise ValueError(f"{len(vectors)} vectors for {len(items)} records")
    cfg = inference or InferencePolicy()
    known = dict(known or {})
    order = sorted(range(len(items)), key=lambda i: (items[i].created, items[i].id))
    dim = vectors.shape[1] if len(vectors) else 0
    leaders = np.zeros((16, dim), dtype=np.float32)
    leader_subject: list[str] = []
    leader_of: dict[str, int] = {}
    subjects: dict[str, str] = {}
    new: dict[str, str] = {}

    def lead(subject: str, v: np.ndarray) -> None:
        nonlocal leaders
        if len(leader_subject) == len(leaders):
            leaders = np.concatenate([leaders, np.zeros_like(leaders)])
        leaders[len(leader_subject)] = v
        leader_of[subject] = len(leader_subject)
        leader_subject.append(subject)

    for i in order:  # known subjects lead first: a stored key never moves
        subj = known.get(items[i].id)
        if subj is not None:
            subjects[items[i].id] = subj
            if subj not in leader_of:
                lead(subj, vectors[i])
    for i in order:
        it = items[i]
        if it.id in subjects:
            continue
        n = len(leader_subject)
        best, sim = -1, -1.0
        if n:
            sims = leaders[:n] @ vectors[i]
            best = int(np.argmax(sims))
            sim = float(sims[best])
        if n and (sim >= cfg.topic_cosine or n >= cfg.max_leaders):
            subj = leader_subject[best]
        else:
            tag = hashlib.sha256(f"{it.id}\x1f{it.norm_sha256}".encode()).hexdigest()[:6]
            subj = f"{subject_keywords(it.text)} ~{tag}"
            lead(subj, vectors[i])
        subjects[it.id] = subj
        new[it.id] = subj

    members: dict[str, list[int]] = defaultdict(list)
    for i in order:
        members[subjects[items[i].id]].append(i)
    statements: dict[str, str] = {}
    updates: dict[str, tuple[str, float]] = {}
    merge = max(near_duplicate, cfg.merge_cosine)
    for idx in members.values():
        if len(idx) < 2:
            continue
        vecs = vectors[idx]
        # statements: a record joins the first earlier statement it says again: same
        # normalised text, or cosine >= merge with the statement's first record, the same
        # polarity and the same names/numbers/dates (a merge must lose no specific)
        root = _statement_leaders(
            vecs, [items[i] for i in idx], merge,
        )  # fmt: skip
        groups_of: dict[int, list[int]] = defaultdict(list)
        for k, r in enumerate(root):
            groups_of[int(r)].append(k)
        for ks in groups_of.values():
            if len(ks) > 1:
                key = items[idx[min(ks)]].norm_sha256
                for k in ks:
                    statements[items[idx[k]].id] = key
        # probable updates: the closest earlier, different statement with an update cue
        for start in range(1, len(idx), _BLOCK):
            stop = min(len(idx), start + _BLOCK)
            sims = vecs[start:stop] @ vecs[:stop].T
            for r in range(stop - start):
                k = start + r
                row = sims[r, :k].copy()
                row[(root[:k] == root[k]) | (row >= merge)] = -np.inf
                if not len(row):
                    continue
                j = int(np.argmax(row))
                if row[j] < cfg.update_cosine:
                    continue
                older, newer = items[idx[j]], items[idx[k]]
                if not looks_like_update(newer.text, older.text):
                    continue
                prev = updates.get(older.id)
                if prev is None or float(row[j]) > prev[1]:
                    updates[older.id] = (newer.id, float(row[j]))
    return SubjectInference(subjects, new, statements, {o: n for o, (n, _) in updates.items()})
