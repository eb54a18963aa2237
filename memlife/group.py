"""Subjects for records that carry none, inferred from embeddings.

What happens inside one consolidation group (statement clusters, survivor, roles, what the
model sees) is decided in one place: memlife/group_plan.py.

Records without a subject get one inferred here (:func:`infer_subjects`): a leader
clustering over their embeddings (time order; a record joins the closest leader at
``policy.inference.topic_cosine`` or leads a new subject named by its keywords). Inside an
inferred subject, near duplicates share a statement key and a probable update (a newer,
related statement with an update cue: "now", "gave up", "moved", a polarity flip) is
reported as an (older, newer) pair: the planner merges the former and sends the latter to
review (or to the model). "Newer" means stated strictly later: two records with the same
``created`` (saved at one instant, e.g. one imported session) are never each other's update.
Every neighbour search is blocked: at most ``_BLOCK`` rows against one subject's members at
a time, never an N x N matrix.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from memlife.policy import Grouping, InferencePolicy
from memlife.speakers import name_key, query_names
from memlife.text import _NEGATION, _UPDATE_CUE, negates, reads_additive

__all__ = ["InferenceItem", "SubjectInference", "infer_subjects", "looks_like_update", "update_cue"]


_BLOCK = 256  # rows compared at a time: memory is _BLOCK x n floats, never n x n
_TRIES = 8  # word checks per row against its closest leaders: the rest stay apart (linear)
_HEAD_CHARS = 256  # what a negation's clause start is looked for in: three words back


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
    purely additive wording ("also allergic to shellfish" complements, it does not replace).
    A flip counts only where the negated clause holds a word the other text uses: "not
    alone" beside "like family", "encourages him not to give up" beside "support each
    other" negate nothing the other says (LoCoMo: most of its review items were such)."""
    flip = negates(newer) != negates(older)
    if flip:
        denied, other = (newer, older) if negates(newer) else (older, newer)
        flip = bool(_negated_words(denied) & _content_words(other))
    cue = update_cue(newer) or flip
    return cue and not reads_additive(newer) and shared_content_word(newer, older)


# An update verb a negation governs says nothing changed: "keep pushing and not give up",
# "never give up", "they do not quit" (all six "give up"s of LoCoMo's observations; each
# opened a POSSIBLE_UPDATE item, audit 49v). "no longer", "any more" stay cues.
_VERB_CUES = frozenset(
    "gave up|give up|given up|quit|stopped|switched|moved|changed|replaced".split("|")
)
_NEGATED_BEFORE = re.compile(
    r"(?:\b(?:not|never|dont|doesnt|didnt|wont|cant|cannot|hasnt|havent|hadnt)|n['\u2019\u02bc]t)"
    r"(?:\s+(?:to|ever|really|yet|even|just))?\s*$",
    re.IGNORECASE,
)


def update_cue(text: str) -> bool:
    """An update word (``_UPDATE_CUE``) in ``text`` that no negation just before denies."""
    for m in _UPDATE_CUE.finditer(text):
        word = " ".join(m.group(0).lower().split())
        if word in _VERB_CUES and _NEGATED_BEFORE.search(text, max(0, m.start() - 40), m.start()):
            continue
        return True
    return False


_CLAUSE_END = re.compile(r"[,;.!?]|\b(?:but|while|although|though|because)\b", re.IGNORECASE)
# the clause a negation stands in begins after the last mark or linking word before it
_CLAUSE_START = re.compile(
    r"(?s:.*)(?:[,;.!?]|\b(?:and|or|but|while|although|though|because)\b)", re.IGNORECASE
)
_INFINITIVE = re.compile(r"\s+to\b", re.IGNORECASE)
# a "no"/"not" opening a concession or an emphasis, not a denial (LoCoMo: "their actions, no
# matter how small, can have a big impact" read as turning round "every small act", 49v)
_NOT_A_DENIAL = re.compile(r"no\s+(?:matter|doubt|wonder)\b|not\s+only\b", re.IGNORECASE)


def _negated_words(text: str) -> set[str]:
    """Content words of each clause holding a negation: "The wedding is not happening"
    denies the wedding as much as "I am not going to the wedding" does: the clause's last
    three words before the negation count too (its subject, not the whole clause: "had a
    check-up with the doctor where the weight wasn't great" denies nothing of the doctor).
    A "not to" denies only what follows ("encourages him not to give up" still encourages)."""
    out: set[str] = set()
    read_to = -1  # where the clause an earlier negation stands in ends: read already
    for m in _NEGATION.finditer(text):
        if _NOT_A_DENIAL.match(text, m.start()):  # "no matter how small" denies nothing
            continue
        if m.end() > read_to:  # linear work: a clause's words are read once
            rest = text[m.end() :]
            end = _CLAUSE_END.search(rest)
            read_to = m.end() + (end.start() if end else len(rest))
            out |= _content_words(text[m.end() : read_to])
        if not _INFINITIVE.match(text, m.end()):  # what it denies of: the words before it
            head = text[max(0, m.start() - _HEAD_CHARS) : m.start()]
            start = _CLAUSE_START.match(head)
            out |= _content_words(" ".join(head[start.end() if start else 0 :].split()[-3:]))
    return out


# -- whom a text is about: the names it opens with -------------------------------------------
# An update says something new of the same person. In a namespace holding several people's
# facts (a conversation's memories in one place) "Jolene spends time playing video games with
# her partner" / "Deborah used to play video games" share words and a cue, yet neither
# replaces the other (LoCoMo, one namespace per conversation: 4 of 33 POSSIBLE_UPDATE items
# paired two people, audit 52a). A name is a word the shard writes capitalised where no
# sentence opens (speakers.query_names), so "Loves cats" / "Hates cats now" name nobody.
_NAME_WINDOW = 4096  # characters of each text read for names (bounded work)
_NAME_JOINERS = frozenset(("and", "&"))
_NAME_TRIM = re.compile(r"(?:['\u2019\u02bc]s?)?[.,:;!?]*$")


def shard_names(texts: Sequence[str]) -> frozenset[str]:
    """The name keys (speakers.name_key) the texts write where no sentence opens."""
    out: set[str] = set()
    for t in texts:
        out.update(query_names(t[:_NAME_WINDOW]).sure)
    return frozenset(out)


def opening_names(text: str, names: frozenset[str]) -> frozenset[str]:
    """The names of ``names`` that ``text`` opens with, joined by "and" or "&" ("Caroline
    and Melanie are", "Evan's son"): whom it is about. Empty when it opens otherwise."""
    out: set[str] = set()
    for i, word in enumerate(text[:_HEAD_CHARS].split()):
        if i % 2:
            if word.lower() in _NAME_JOINERS:
                continue
            break
        key = name_key(_NAME_TRIM.sub("", word))
        if not (word[:1].isupper() and key in names):
            break
        out.add(key)
    return frozenset(out)


# A text that speaks of the user (first person, "the user") is the user's fact whatever name
# opens it: "Bob is the user's manager" / "Alice is now the user's manager" is one person's
# update of a role, its names whom the role names (audit 52r)
_SELF = frozenset("i me my mine myself user".split())
_SELF_WORD = re.compile(r"[^\W\d_]+")


def _speaks_of_the_user(text: str) -> bool:
    return any(w.lower() in _SELF for w in _SELF_WORD.findall(text[:_NAME_WINDOW]))


def about_other_people(newer: str, older: str, names: frozenset[str]) -> bool:
    """Both texts open with names and share none: two people's facts, never an update of
    one another ("Caroline and Melanie are friends" / "Melanie is no longer ..." share one).
    Not when either speaks of the user: its names are then what the user's fact names."""
    a, b = opening_names(newer, names), opening_names(older, names)
    if not (a and b) or a & b:
        return False
    return not (_speaks_of_the_user(newer) or _speaks_of_the_user(older))


def _statement_leaders(
    vecs: np.ndarray, items: Sequence[InferenceItem], threshold: float
) -> np.ndarray:
    """For each row, the index of the first row of its statement (leader clustering, time
    order, blocked: a block of rows against the leaders so far, then within the block)."""
    from memlife.consolidate.grounding import specifics
    from memlife.restate import restates

    n = len(items)
    root = np.arange(n)
    leaders: list[int] = []
    by_norm: dict[str, int] = {}
    spec: dict[int, frozenset[str]] = {}  # computed only for rows that have a candidate

    def spec_of(k: int) -> frozenset[str]:
        if k not in spec:
            spec[k] = frozenset(specifics(items[k].text))
        return spec[k]

    def same_words(j: int, k: int) -> bool:
        # cosine, polarity and names/numbers are not enough: "two"/"three" medications, km /
        # miles, brother / sister and swapped roles passed them (memlife/restate.py)
        return restates(items[j].text, items[k].text)

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
            best, tries = None, _TRIES
            for _, j in sorted(cand, reverse=True):  # the closest first, as max() chose
                if items[j].negated != it.negated or spec_of(j) != spec_of(k):
                    continue
                if same_words(j, k):
                    best = j
                    break
                tries -= 1
                if not tries:  # a row near many statements it restates none of
                    break
            if best is not None:
                root[k] = best
            else:
                leaders.append(k)
                by_norm[it.norm_sha256] = k
    return root


def closest_earlier(
    vecs: np.ndarray,
    root: np.ndarray,
    merge: float,
    floor: float,
    times: np.ndarray | None = None,
) -> list[tuple[int, int, float]]:
    """(k, j, cosine) for each row k whose most similar earlier row j (the first on a tie)
    of another statement, among those below ``merge``, reaches ``floor``; rows in order.
    ``times`` (the rows' statement times, ascending like the rows): earlier means strictly
    earlier in time, so rows saved at the same instant are skipped, not paired.
    Blocked: ``_BLOCK`` rows against the rows before them at a time, never n x n."""
    out: list[tuple[int, int, float]] = []
    for start in range(1, len(vecs), _BLOCK):
        stop = min(len(vecs), start + _BLOCK)
        sims = vecs[start:stop] @ vecs[:stop].T
        ks = np.arange(start, stop)
        keep = np.arange(stop)[None, :] < ks[:, None]
        if times is not None:
            # Same-time siblings carry no order (their row order is only the id tie-break),
            # so neither can update the other. They are skipped, not ended on: a genuinely
            # older statement behind the sibling can still be the one this row updates.
            keep &= times[None, :stop] < times[ks][:, None]
        keep &= root[None, :stop] != root[ks][:, None]
        keep &= ~(sims >= merge)
        sims = np.where(keep, sims, np.float32(-np.inf))
        best = sims.argmax(axis=1)
        vals = sims[np.arange(stop - start), best]
        for r in np.flatnonzero(~(vals < floor)).tolist():
            out.append((start + r, int(best[r]), float(vals[r])))
    return out


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
    names: frozenset[str] | None = None  # the shard's names, read at the first pair
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
        # probable updates: the closest strictly earlier, different statement with an update
        # cue (records saved at the same instant are never each other's update)
        times = np.array([items[i].created for i in idx], dtype=np.float64)
        for k, j, sim in closest_earlier(vecs, root, merge, cfg.update_cosine, times):
            older, newer = items[idx[j]], items[idx[k]]
            if not looks_like_update(newer.text, older.text):
                continue
            if names is None:
                names = shard_names([it.text for it in items])
            if about_other_people(newer.text, older.text, names):
                continue  # two people's facts: neither replaces the other
            prev = updates.get(older.id)
            if prev is None or sim > prev[1]:
                updates[older.id] = (newer.id, sim)
    return SubjectInference(subjects, new, statements, {o: n for o, (n, _) in updates.items()})
