"""The regression gate: an evaluation set run through recall before and after a run's changes.

Recall here is the online recall's ranking (``memlife.retrieval.rank``: dense MiniLM +
BM25) over the ACTIVE records of the case's actor (and namespace), with vectors from the
embedding cache. "Before" is the store as the run found it. "After" is a SHADOW VIEW:
the same active set minus what the run would supersede, quarantine or delete, plus the
replacements it staged (held in the run, not in the store); nothing changes to evaluate. Deletion candidates that are already
quarantined count as present in "before" (quarantine is a pause, not a verdict), so a
must-retain record that was quarantined once stays protected on the next night.

Four separate gates, thresholds from ``policy.gate``:
  must_retain_recall   share of cases with must_retrieve targets whose recall@k >= min_result
  forbidden_retrieval  share of forbidden targets (ids or claims) that surface in a top-k
  contradiction_rate   share of cases whose top-k hands the agent competing versions of a
                       fact: a must-retrieve hit together with a forbidden hit, or two
                       different statements on one subject (non-episodic, same namespace)
  aggregate_score      mean case score (recall@k times the share of forbidden targets kept
                       out; 0 when a checked answer fails), high-impact cases weighted x2
The verdict blocks the commit when a HIGH-impact case fails on the after view, when any
case fails after and the run made it fail (or fail worse), when a gate fails after and
the run made it worse than before, or (``block_on_absolute``) when a gate is below its
threshold at all; below threshold but not worse is a ``warn``. A blocked verdict names
which part blocks: the deletions (narrowed to the actors whose cases they hurt), the
supersedes, or both (each part's own after view is evaluated, so an innocent part is not
held hostage). A case that reads no record, or whose must-retrieve id is no record of
its actor, checks nothing: it is left out and reported (``coverage``). Replicas re-run the set (``policy.gate.replicas``):
a case passes only if it passes in every replica. The verdict holds case ids, gate
names and figures: never a query, a fact or any record content.

Why one module (over 500 lines): the gate is one verdict. Shadow recall, the case runner,
the per-part verdict, the search for the blocking groups and the staged run's entry point
all read and write the same report shape; recall's ranking itself is shared
(``retrieval.rank_sets``), not repeated here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from memlife.backends import embedding_cache
from memlife.embed import embed_for_recall
from memlife.errors import CorruptRecordError
from memlife.evalset import CaseKind, EvalCase, Impact, Target, load_cases
from memlife.lexical import LexicalIndex, unspaced_script
from memlife.model import MemoryRecord, MemoryType, Status
from memlife.online.index import ANALYSIS_WINDOW
from memlife.policy import GatePolicy, Policy
from memlife.retrieval import DEFAULT_THRESHOLD, rank_sets
from memlife.settings import settings
from memlife.stores.base import MemoryStore, iter_shard
from memlife.text import normalise
from memlife.timeref import epoch_seconds
from memlife.token_match import QueryTokens, TokenCodes

if TYPE_CHECKING:
    from memlife.embed_cache import EmbeddingCache

GATES = ("must_retain_recall", "forbidden_retrieval", "contradiction_rate", "aggregate_score")
# Deletions that are obligations, not judgements: they go ahead without an evaluation set.
# expires_at passed; a user forgot it; the record a superseded one points to is deleted
# (kept, it would point to nothing: invariant 3, memlife/orphans.py; it is served by no one)
OBLIGATIONS = frozenset({"HARD_EXPIRED", "GRACE_ELAPSED", "REPLACEMENT_DELETED"})

# (query, retrieved contents) -> the model's final answer
Answerer = Callable[[str, Sequence[str]], str]


# -- recall over a (shadow) view --------------------------------------------------------------
@dataclass
class _Corpus:
    """One namespace's view, a :class:`memlife.retrieval.RankSet`."""

    records: list[MemoryRecord]
    vectors: np.ndarray
    lexical: LexicalIndex
    created: np.ndarray  # POSIX seconds per record (recall's time terms)
    centroid: None = None  # rank() takes the mean of the view's vectors
    cache: EmbeddingCache | None = None  # token codes for token alignment, as online

    def __post_init__(self) -> None:
        self.ids = [r.id for r in self.records]
        self._codes: dict[int, TokenCodes] = {}

    def token_codes(self, rows: np.ndarray) -> list[TokenCodes | None]:
        """Token codes of ``rows`` (stored with the vectors), read once per view row."""
        missing = [int(r) for r in rows if int(r) not in self._codes]
        if missing and self.cache is not None:
            texts = [self.records[r].content for r in missing]
            got = self.cache.token_codes(texts, store=False)  # an evaluation writes nothing
            if got is not None:
                self._codes.update(zip(missing, got, strict=True))
        return [self._codes.get(int(r)) for r in rows]


class ShadowRecall:
    """Recall as the online library ranks it, over the active set with ids masked out.

    Ranks as ``LongTermMemory.recall`` does, with the same function
    (``retrieval.rank_sets``: the actor's namespaces ranked as one set, cosine +
    max-normalised BM25 + time terms + token alignment, threshold on the cosine, default
    ``DEFAULT_THRESHOLD``)
    over the ACTIVE records. It does
    not write to the access ledger (an evaluation is not an access). Records and vectors
    are loaded once per (actor, namespace); a view (the excluded ids) masks rows and
    rebuilds the BM25 index (idf depends on the corpus, as it would after a delete).
    """

    def __init__(
        self,
        store: MemoryStore,
        cache: EmbeddingCache | None = None,
        added: Iterable[MemoryRecord] = (),
        token_alignment: bool | None = None,  # None: settings(), as online recall reads it
        hidden: Callable[[MemoryRecord], bool] | None = None,  # what online recall never serves
    ):

        self.store = store
        self.hidden = hidden
        self.cache = cache if cache is not None else embedding_cache(store)
        self.token_alignment = (
            settings().token_alignment if token_alignment is None else token_alignment
        )
        # staged replacements: in views with plus=True only (the run's "after")
        self.added: dict[tuple[str, str], list[MemoryRecord]] = {}
        for r in added:
            self.added.setdefault((r.actor_id, r.namespace), []).append(r)
        self._base: dict[
            tuple[str, str, frozenset[str]], tuple[list[MemoryRecord], np.ndarray]
        ] = {}
        self._views: dict[tuple[str, str, frozenset[str], frozenset[str], bool], _Corpus] = {}
        self._qvec: dict[str, tuple[np.ndarray, QueryTokens | None]] = {}
        self._prov: dict[str, MemoryRecord | None] = {}
        self._names: dict[str, list[str]] = {}
        # (replica, query, retrieved texts) -> the model's answer, or what it raised
        self._answers: dict[tuple[int, str, tuple[str, ...]], str | Exception] = {}

    def answering(self, answerer: Answerer, replica: int = 0) -> Answerer:
        """``answerer`` asked once per question and retrieved texts in a replica: a case
        whose retrieval the run does not change gets the same answer in every view, so a
        model's other wording on a second request is never read as the run's regression
        (CASE_REGRESSED held every tenant's deletions: audit 51iii). Each replica asks
        afresh. Answers stay in memory for this evaluation only."""

        def ask(query: str, contexts: Sequence[str]) -> str:
            key = (replica, query, tuple(contexts))
            if key not in self._answers:
                try:
                    self._answers[key] = answerer(query, contexts)
                except Exception as exc:  # the same outage for the same retrieval
                    self._answers[key] = exc
            got = self._answers[key]
            if isinstance(got, Exception):
                raise got
            return got

        return ask

    def namespaces(self, actor: str) -> list[str]:
        if actor not in self._names:
            staged = {ns for a, ns in self.added if a == actor}
            self._names[actor] = sorted(set(self.store.list_namespaces(actor)) | staged)
        return self._names[actor]

    def _load(
        self, actor: str, namespace: str, extra: frozenset[str]
    ) -> tuple[list[MemoryRecord], np.ndarray]:
        key = (actor, namespace, extra)
        if key not in self._base:
            records: list[MemoryRecord] = []
            try:
                for page in iter_shard(self.store, actor, namespace, statuses=[Status.active]):
                    # a record online recall never serves (past its deadline where the run
                    # does not delete it: a held one, a namespace not enforced) answers no
                    # case: counted, it hid a fact the run lost. The run's own candidates stay
                    records += [r for r in page.records if r.status is Status.active
                                and (self.hidden is None or r.id in extra
                                     or not self.hidden(r))]  # fmt: skip
            except (KeyError, TypeError, ValueError, CorruptRecordError) as exc:
                raise unreadable(self.store, actor, namespace, exc) from None
            have = {r.id for r in records}
            for rid in sorted(extra - have):  # quarantined candidates: present in "before"
                r = self.store.get(rid)
                if (
                    r is not None
                    and r.actor_id == actor
                    and r.namespace == namespace
                    and r.status is Status.quarantined
                ):
                    records.append(r)
            records.sort(key=lambda r: r.id)
            vecs = self.cache.get_or_embed(records) if records else np.zeros((0, 1), np.float32)
            self._base[key] = (records, vecs)
        return self._base[key]

    def corpus(
        self,
        actor: str,
        namespace: str,
        *,
        exclude: frozenset[str] = frozenset(),
        include: frozenset[str] = frozenset(),
        plus: bool = False,
    ) -> _Corpus:
        key = (actor, namespace, exclude, include, plus)
        view = self._views.get(key)
        if view is None:
            records, vecs = self._load(actor, namespace, include)
            keep = [i for i, r in enumerate(records) if r.id not in exclude]
            recs = [records[i] for i in keep]
            kept = vecs[keep] if keep else None
            extra = self.added.get((actor, namespace), []) if plus else []
            have = {r.id for r in recs}
            extra = [r for r in extra if r.id not in have and r.id not in exclude]
            if extra:
                # staged replacements are no record's content yet: embedded, not kept
                more = self.cache.get_or_embed(extra, store=False)
                kept = more if kept is None else np.vstack([kept, more])
                recs = recs + extra
            view = _Corpus(
                recs,
                kept if kept is not None else vecs[:0],
                # what the online shard index reads of each record (its BM25 terms and
                # speakers): past it, the gate ranked on words online recall never sees
                LexicalIndex([r.content[:ANALYSIS_WINDOW] for r in recs]),
                np.array([epoch_seconds(r.created_at) for r in recs], dtype=np.float64),
                cache=self.cache,
            )
            self._views[key] = view
        return view

    def forget(self, exclude: frozenset[str]) -> None:
        """Drop the views cached for ``exclude`` (each holds a copy of its vectors)."""
        for key in [k for k in self._views if k[2] == exclude]:
            del self._views[key]

    def query_vector(self, query: str) -> np.ndarray:
        return self._query(query)[0]

    def _query(self, query: str) -> tuple[np.ndarray, QueryTokens | None]:
        """The query's vector and token states (one pass; None for an embedder without)."""
        if query not in self._qvec:  # queries are embedded, never cached in the store
            self._qvec[query] = embed_for_recall(self.cache.embedder, query, self.token_alignment)
        return self._qvec[query]

    def recall(
        self,
        query: str,
        actor: str,
        namespace: str | None = None,
        *,
        k: int = 5,
        threshold: float | None = None,
        exclude: Iterable[str] = (),
        include: Iterable[str] = (),
        plus: bool = False,
    ) -> list[MemoryRecord]:
        """Top-k active records for ``query`` in the view (best first)."""
        thr = DEFAULT_THRESHOLD if threshold is None else threshold
        ex, inc = frozenset(exclude), frozenset(include)
        names = [namespace] if namespace is not None else self.namespaces(actor)
        views = [self.corpus(actor, ns, exclude=ex, include=inc, plus=plus) for ns in names]
        qv, tokens = self._query(query)
        ranked = rank_sets(qv, query, views, k=k, threshold=thr, query_tokens=tokens)
        return [views[r.which].records[r.row] for r in ranked[:k]]

    def lineage(self, record: MemoryRecord, gone: frozenset[str] = frozenset()) -> set[str]:
        """The record's id and every id it supersedes, transitively (replacement chains).
        ``gone``: ids the view has deleted; the chain stops there, as it will on the
        committed store (a deleted record names no sources)."""
        out = {record.id}
        todo = list(record.provenance.supersedes)
        while todo:
            rid = todo.pop()
            if rid in out:
                continue
            out.add(rid)
            if rid in gone:
                continue
            if rid not in self._prov:
                self._prov[rid] = self.store.get(rid)
            src = self._prov[rid]
            if src is not None:
                todo += src.provenance.supersedes
        return out


# -- one case ---------------------------------------------------------------------------------
def _text_hit(t: Target, records: Sequence[MemoryRecord]) -> bool:
    needle = normalise(t.text or "")
    if not needle:  # every content holds the empty text (a blank target is refused at load)
        return bool(records)
    # whole words ("cat" is not in "education", nor "ham" in "hamburg"); an edge in a script
    # written without spaces (Chinese, Thai) may sit inside a run of it
    left = "" if unspaced_script(needle[0]) else r"(?<![^\W_])"
    right = "" if unspaced_script(needle[-1]) else r"(?![^\W_])"
    words = re.compile(left + re.escape(needle) + right)
    return any(words.search(normalise(r.content)) for r in records)


def _competing(records: Sequence[MemoryRecord]) -> bool:
    seen: dict[tuple[str, str], str] = {}
    for r in records:
        if not r.subject or r.memory_type is MemoryType.episodic:
            continue
        key = (r.namespace, r.subject.strip().lower())
        norm = normalise(r.content)
        if seen.setdefault(key, norm) != norm:
            return True
    return False


def run_case(
    case: EvalCase,
    recall: ShadowRecall,
    *,
    exclude: Iterable[str] = (),
    include: Iterable[str] = (),
    answerer: Answerer | None = None,
    plus: bool = False,
) -> dict[str, Any]:
    """One case on one view: retrieved ids, recall@k, forbidden hits, pass/fail. Ids only."""
    got = recall.recall(
        case.query,
        case.actor_id,
        case.namespace,
        k=case.k,
        threshold=case.threshold,
        exclude=exclude,
        include=include,
        plus=plus,
    )
    # ``include``: the records the run deletes (loaded so a view can leave them out); the
    # ones this view leaves out are gone once it commits, and no lineage passes through them
    gone = frozenset(exclude) & frozenset(include)
    covered: set[str] = set()
    for r in got:
        covered |= recall.lineage(r, gone)
    must_hits = [
        t
        for t in case.must_retrieve
        if (t.id in covered if t.id is not None else _text_hit(t, got))
    ]
    retrieved_ids = {r.id for r in got}
    forbidden_hits = [
        t
        for t in case.forbidden
        if (t.id in retrieved_ids if t.id is not None else _text_hit(t, got))
    ]
    total = len(case.must_retrieve)
    recall_at_k = len(must_hits) / total if total else 1.0
    missing = [t.label for t in case.must_retrieve if t not in must_hits]
    out: dict[str, Any] = {
        "id": case.id,
        "kind": case.kind.value,
        "impact": case.impact.value,
        "k": case.k,
        "retrieved": [r.id for r in got],
        "must_total": total,
        "must_hits": len(must_hits),
        "recall_at_k": round(recall_at_k, 6),
        "missing": missing,
        "forbidden_total": len(case.forbidden),
        "forbidden_hits": [t.label for t in forbidden_hits],
        "contradiction": bool((must_hits and forbidden_hits) or _competing(got)),
    }
    passed = recall_at_k >= case.min_result and not forbidden_hits
    if answerer is not None and (case.answer_must_include or case.answer_must_not_include):
        try:
            answer = normalise(answerer(case.query, [r.content for r in got]))
        except Exception as exc:  # a model outage is reported, not a verdict on the data
            out["answer"] = {"checked": False, "error": type(exc).__name__}
        else:
            ok = all(normalise(s) in answer for s in case.answer_must_include) and not any(
                normalise(s) in answer for s in case.answer_must_not_include
            )
            out["answer"] = {"checked": True, "passed": ok}
            passed = passed and ok
    out["passed"] = passed
    kept_out = 1 - len(forbidden_hits) / len(case.forbidden) if case.forbidden else 1.0
    answered = out.get("answer", {}).get("passed", True) is not False
    out["score"] = round(recall_at_k * kept_out if answered else 0.0, 6)
    return out


# -- a whole set on one view ------------------------------------------------------------------
def _gate(value: float, threshold: float, passed: bool) -> dict[str, Any]:
    return {"value": round(value, 6), "threshold": threshold, "passed": passed}


def run_set(
    cases: Sequence[EvalCase],
    recall: ShadowRecall,
    gate: GatePolicy,
    *,
    exclude: Iterable[str] = (),
    include: Iterable[str] = (),
    answerer: Answerer | None = None,
    plus: bool = False,
) -> dict[str, Any]:
    """Every case, ``gate.replicas`` times; a case passes only if it passes every time."""
    exclude, include = frozenset(exclude), frozenset(include)
    per_case: dict[str, dict[str, Any]] = {}
    flaky: list[str] = []
    unread: dict[str, dict[str, Any]] = {}  # case id -> where it could not read (ids only)
    for n in range(gate.replicas):
        ask = recall.answering(answerer, n) if answerer is not None else None
        for c in cases:
            if c.id in unread:
                continue
            try:
                res = run_case(c, recall, exclude=exclude, include=include, answerer=ask, plus=plus)
            except CorruptRecordError as exc:
                unread[c.id] = {"case": c.id, "actor_id": c.actor_id, "namespace": c.namespace,
                                "record_id": exc.record_id, "field": exc.field}  # fmt: skip
                continue
            prev = per_case.get(c.id)
            if prev is None:
                per_case[c.id] = res
                continue
            if prev["retrieved"] != res["retrieved"] or prev["passed"] != res["passed"]:
                if c.id not in flaky:
                    flaky.append(c.id)
            if not res["passed"] or res["recall_at_k"] < prev["recall_at_k"]:
                res["contradiction"] = res["contradiction"] or prev["contradiction"]
                per_case[c.id] = res  # keep the worst replica
            elif res["contradiction"]:
                prev["contradiction"] = True
    results = [per_case[c.id] for c in cases if c.id not in unread]
    with_must = [r for r in results if r["must_total"]]
    floor = {c.id: c.min_result for c in cases}  # ids are unique (evalset); a scan per result
    must_ok = [r for r in with_must if r["recall_at_k"] >= floor[r["id"]]]  # was quadratic
    must_value = len(must_ok) / len(with_must) if with_must else 1.0
    f_total = sum(r["forbidden_total"] for r in results)
    f_hits = sum(len(r["forbidden_hits"]) for r in results)
    f_value = f_hits / f_total if f_total else 0.0
    c_value = sum(1 for r in results if r["contradiction"]) / len(results) if results else 0.0
    weights = [2.0 if r["impact"] == Impact.high.value else 1.0 for r in results]
    a_value = (
        sum(w * r["score"] for w, r in zip(weights, results, strict=True)) / sum(weights)
        if results
        else 1.0
    )
    failed = [r["id"] for r in results if not r["passed"]]
    # a model error leaves a case's answer unchecked (it does not decide the case): named, so
    # the receipt never claims a check that did not run (audit 49iii)
    unchecked = [r["id"] for r in results if r.get("answer", {}).get("checked") is False]
    return {
        "gates": {
            "must_retain_recall": _gate(
                must_value, gate.must_retain_recall_min, must_value >= gate.must_retain_recall_min
            ),
            "forbidden_retrieval": _gate(
                f_value, gate.forbidden_retrieval_max, f_value <= gate.forbidden_retrieval_max
            ),
            "contradiction_rate": _gate(
                c_value, gate.contradiction_rate_max, c_value <= gate.contradiction_rate_max
            ),
            "aggregate_score": _gate(
                a_value, gate.aggregate_score_min, a_value >= gate.aggregate_score_min
            ),
        },
        "cases": len(results),
        "replicas": gate.replicas,
        "failed_cases": failed,
        "high_impact_failed": [
            r["id"] for r in results if not r["passed"] and r["impact"] == Impact.high.value
        ],
        "flaky_cases": flaky,
        "answers_unchecked": unchecked,
        "unreadable_cases": list(unread.values()),
        "results": results,
    }


def unreadable(
    store: MemoryStore, actor: str, namespace: str, exc: BaseException
) -> CorruptRecordError:
    """A shard the gate could not read: the stored row and field at fault (the store looks
    for it, as planning does), never the value. Not a bad row at all: our bug, raised."""
    if isinstance(exc, CorruptRecordError):
        return exc
    find = getattr(store, "corrupt_row", None)
    found: CorruptRecordError | None = find(actor, namespace) if find is not None else None
    if found is None:
        raise exc
    return found


def _worse(name: str, before: float, after: float) -> bool:
    lower_is_worse = name in ("must_retain_recall", "aggregate_score")
    return after < before if lower_is_worse else after > before


def _regressed(before: dict[str, Any], after: dict[str, Any]) -> bool:
    """One case's results: it fails after, and passed before or scores lower now."""
    return not after["passed"] and (before["passed"] or after["score"] < before["score"])


def regressed_cases(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """The cases of two run_set reports that the change made fail, or fail worse."""
    was = {r["id"]: r for r in before["results"]}
    return [r["id"] for r in after["results"] if r["id"] in was and _regressed(was[r["id"]], r)]


def verdict(
    before: dict[str, Any],
    after: dict[str, Any],
    proposed: int,
    gate: GatePolicy | None = None,
) -> dict[str, Any]:
    """Compare two run_set reports: blocked, the gates (after, with before's figure), cases.

    Each gate's ``result``: pass; warn (below threshold, not made worse by the run);
    regressed (below and worse: blocks); fail (below, ``block_on_absolute``: blocks).
    """
    absolute_blocks = gate is not None and gate.block_on_absolute
    reasons: list[str] = []
    warnings: list[str] = []
    if after["high_impact_failed"]:
        reasons.append("HIGH_IMPACT_CASE_FAILED")
    # a case the run breaks blocks on its own: a gate's figure is a mean, and another
    # case the same run fixes would hide it (one case lost, another found: no gate moves)
    regressed = regressed_cases(before, after)
    if regressed:
        reasons.append("CASE_REGRESSED")
    gates: dict[str, Any] = {}
    for name in GATES:
        a, b = after["gates"][name], before["gates"][name]
        result = "pass"
        if not a["passed"] and _worse(name, b["value"], a["value"]):
            reasons.append(f"GATE_REGRESSED:{name}")
            result = "regressed"
        elif not a["passed"] and absolute_blocks:
            reasons.append(f"GATE_BELOW_THRESHOLD:{name}")
            result = "fail"
        elif not a["passed"]:
            warnings.append(name)
            result = "warn"
        gates[name] = {**a, "before": b["value"], "result": result}

    def slim(rep: dict[str, Any]) -> dict[str, Any]:
        return {
            "gates": {n: rep["gates"][n]["value"] for n in GATES},
            "failed_cases": rep["failed_cases"],
            "high_impact_failed": rep["high_impact_failed"],
        }

    unchecked = sorted(
        set(before.get("answers_unchecked", ())) | set(after.get("answers_unchecked", ()))
    )
    return {
        "configured": True,
        "blocked": bool(reasons),
        # answer checks the model did not run: not a pass (what was asked was not checked)
        "status": "blocked" if reasons else ("warn" if warnings or unchecked else "pass"),
        "reasons": reasons,
        "warnings": warnings,
        "proposed_deletions": proposed,
        "cases": after["cases"],
        "replicas": after["replicas"],
        "gates": gates,
        "failed_cases": after["failed_cases"],
        "high_impact_failed": after["high_impact_failed"],
        "regressed_cases": regressed,
        "flaky_cases": sorted(set(before["flaky_cases"]) | set(after["flaky_cases"])),
        "answers_unchecked": unchecked,
        "before": slim(before),
        "after": slim(after),
    }


# -- entry points -------------------------------------------------------------------------------
def model_answerer_from_env() -> Answerer | None:
    """An Anthropic answerer when ANTHROPIC_API_KEY is set (MEMLIFE_MODEL picks the model)."""
    env = settings()
    if not env.anthropic_api_key:
        return None
    import anthropic

    from memlife.consolidate.anthropic import DEFAULT_MODEL
    from memlife.consolidate.deadline import deadline_client_options

    client = anthropic.Anthropic(  # each request bounded whole, as the consolidator's
        timeout=env.model_timeout,
        max_retries=2,
        http_client=anthropic.DefaultHttpxClient(**deadline_client_options(env.model_timeout)),
    )
    model = env.model or DEFAULT_MODEL

    def answer(query: str, contexts: Sequence[str]) -> str:
        memories = "\n".join(f"- {c}" for c in contexts) or "(none)"
        # no temperature: this SDK's Messages.create takes none (the call raised TypeError)
        msg = client.messages.create(
            model=model,
            max_tokens=300,
            system="Answer the user's question using only the memories given. Be brief.",
            messages=[{"role": "user", "content": f"Memories:\n{memories}\n\nQuestion: {query}"}],
        )
        return "".join(getattr(b, "text", "") for b in msg.content)

    return answer


def evaluate(
    store: MemoryStore,
    cases: Sequence[EvalCase] | str,
    *,
    policy: Policy | None = None,
    cache: EmbeddingCache | None = None,
    answerer: Answerer | None = None,
    exclude: Iterable[str] = (),
) -> dict[str, Any]:
    """On demand: run a set against the store as it is (optionally minus ``exclude`` ids)."""
    from memlife.consolidate.replacement import past_lifetime
    from memlife.model import utcnow
    from memlife.policy import load_policy

    policy = policy or load_policy()
    if isinstance(cases, str):
        cases = load_cases(cases)
    # what online recall never serves (past its deadline) answers no case, as at night
    ttl, now = policy.ttl_days(), utcnow()
    recall = ShadowRecall(store, cache, hidden=lambda r: past_lifetime(r, ttl, now))
    report = run_set(cases, recall, policy.gate, exclude=exclude, answerer=answerer)
    # a case that could not read its records was not evaluated: no pass (four passing gates
    # over 0 cases exited 0, audit 53iii); the night withholds what it judges
    failed = not all(g["passed"] for g in report["gates"].values())
    report["blocked"] = bool(report["high_impact_failed"] or report["unreadable_cases"]) or failed
    return report


def not_configured(
    policy: GatePolicy, withheld_deletions: int = 0, withheld_groups: int = 0
) -> dict[str, Any]:
    """The verdict of a run without an evaluation set (receipt and summary say so)."""
    return {
        "configured": False,
        "required": policy.required,
        "blocked": False,
        "status": "not_configured",
        "reasons": ["GATE_NOT_CONFIGURED"],
        "withheld_deletions": withheld_deletions,
        "withheld_groups": withheld_groups,
    }


def evaluate_changes(
    store: MemoryStore,
    cases: Sequence[EvalCase],
    gate: GatePolicy,
    *,
    deletions: Iterable[str] = (),
    superseded: Iterable[str] = (),
    replacements: Sequence[MemoryRecord] = (),
    cache: EmbeddingCache | None = None,
    answerer: Answerer | None = None,
    groups: Sequence[tuple[str, Sequence[str]]] = (),
    owners: Mapping[str, str] | None = None,
    hidden: Callable[[MemoryRecord], bool] | None = None,
) -> dict[str, Any]:
    """Step 8 on everything staged: before (the store as found) vs after (a shadow view
    minus ``deletions`` and ``superseded`` ids, plus the staged ``replacements``).
    ``groups``: (replacement id, superseded ids) per staged group; when the supersedes
    block, ``blocking_groups`` names the ones that do (the consolidation memo keeps them).
    ``owners``: deletion id -> actor; when the deletions block, ``blocking_actors`` names
    the actors whose deletions are held (the others' go ahead), or is absent (all held).
    ``hidden``: records online recall never serves (past their deadline), left out of
    both views unless the run deletes them.

    When blocked, each part's own after view is evaluated too, so that the verdict can
    say which part blocks (``deletions_blocked``, ``supersedes_blocked``): the pipeline
    commits only a view that was evaluated and passed. Reads only; the caller (the run's
    gate step, memlife/run_commit.py) loads the cases and snapshots what is held back.
    """
    recall = ShadowRecall(store, cache, added=replacements, hidden=hidden)
    dels = frozenset(deletions)
    sups = frozenset(superseded)
    # a case that reads nothing here checks nothing: left out, what it judges waits
    unchecked = coverage(cases, recall, include=dels)
    skip = {u["case"] for u in unchecked}
    cases = [c for c in cases if c.id not in skip]

    unread: dict[str, dict[str, Any]] = {}  # a case any view could not read: by case id

    def seen(rep: dict[str, Any]) -> dict[str, Any]:
        unread.update((u["case"], u) for u in rep["unreadable_cases"])
        return rep

    def run(
        exclude: frozenset[str], plus: bool, subset: Sequence[EvalCase] | None = None
    ) -> dict[str, Any]:
        return seen(run_set(
            cases if subset is None else subset, recall, gate, exclude=exclude, include=dels,
            answerer=answerer, plus=plus,
        ))  # fmt: skip

    before = run(frozenset(), False)
    changed = bool(dels or sups or replacements)
    after = run(dels | sups, True) if changed else before
    out = verdict(before, after, len(dels), gate)
    out["proposed_supersedes"] = len(sups)
    out["staged_replacements"] = len(replacements)
    out["answers"] = "model" if answerer is not None else "skipped"
    out["deletions_blocked"] = out["supersedes_blocked"] = out["blocked"]
    blamed = after  # the view whose cases the deletions made worse
    if out["blocked"] and dels and (sups or replacements):
        dels_only = run(dels, False)
        only_dels = verdict(before, dels_only, len(dels), gate)["blocked"]
        only_sups = verdict(before, run(sups, True), 0, gate)["blocked"]
        if only_dels or only_sups:  # both pass alone but not together: hold both
            out["deletions_blocked"], out["supersedes_blocked"] = only_dels, only_sups
            blamed = dels_only if only_dels else after
    elif out["blocked"]:
        out["deletions_blocked"], out["supersedes_blocked"] = bool(dels), bool(sups)
    if out["deletions_blocked"] and owners:
        # what commits: the other actors' deletions, plus the supersedes if they go ahead
        sups_kept = frozenset() if out["supersedes_blocked"] else sups

        def without(
            actors: frozenset[str], subset: Sequence[EvalCase] | None = None
        ) -> dict[str, Any]:
            kept = frozenset(d for d in dels if owners.get(d) not in actors)
            view = kept | sups_kept
            rep = run(view, not out["supersedes_blocked"], subset)
            recall.forget(view)
            return rep

        actors = blocking_actors(before, blamed, cases, owners, dels)
        if actors and not verdict(before, without(frozenset(actors)), len(dels), gate)["blocked"]:
            out["blocking_actors"] = actors
        elif failing := {c.actor_id for c in cases if c.id in set(blamed["high_impact_failed"])}:
            # a high-impact case that fails whatever the run does blocks every view: its
            # actor's deletions wait, and the others' are judged by their own actors' cases
            # (recall is actor-scoped: another tenant's deletion cannot move it)
            owned = {owners.get(d, "") for d in dels}
            held = frozenset(set(actors) | (failing & owned))
            rest = [c for c in cases if c.actor_id not in failing]
            was = run(frozenset(), False, rest)
            if held != owned and not verdict(was, without(held, rest), len(dels), gate)["blocked"]:
                out["blocking_actors"] = sorted(held)
                out["deletions_blocked"] = bool(held)
    failing_before = {c.actor_id for c in cases if c.id in set(before["high_impact_failed"])}
    if out["supersedes_blocked"] and failing_before and all(r.actor_id not in failing_before
                                                     for r in replacements):  # fmt: skip
        # as for the deletions: a high-impact case failing_before whatever the run does holds its
        # own actor's changes (it owns no group here); the others' supersedes are judged by
        # their own actors' cases (blocked with none named, they were paid for each night)
        rest = [c for c in cases if c.actor_id not in failing_before]
        holding = set(out.get("blocking_actors", ())) if out["deletions_blocked"] else set()
        kept = frozenset(d for d in dels if not out["deletions_blocked"]
                         or (holding and owners and owners.get(d) not in holding))  # fmt: skip
        if not verdict(run(frozenset(), False, rest), run(kept | sups, True, rest), 0, gate)[
            "blocked"
        ]:
            out["supersedes_blocked"] = False
    if out["supersedes_blocked"] and groups:
        scope = {r.id: (r.actor_id, r.namespace) for r in replacements}

        def trial(exclude: frozenset[str], subset: Sequence[EvalCase]) -> dict[str, Any]:
            rep = run_set(subset, recall, gate, exclude=exclude, include=dels,
                          answerer=answerer, plus=True)  # fmt: skip
            recall.forget(exclude)  # one trial view at a time: memory stays bounded
            return seen(rep)

        out["blocking_groups"] = blocking_groups(cases, gate, before, groups, scope, trial)
    # cases some view could not read (a stored row that does not decode, reached before or
    # only after the changes, through a replacement's sources): not evaluated there, so the
    # run withholds what they would have judged (memlife/run_commit.py)
    out["unreadable_cases"] = sorted(unread.values(), key=lambda u: u["case"])
    out["uncovered_cases"] = unchecked
    return out


def coverage(
    cases: Sequence[EvalCase], recall: ShadowRecall, include: frozenset[str] = frozenset()
) -> list[dict[str, Any]]:
    """The cases that check nothing in this store, with the scope they would have judged
    (ids only): ``NO_RECORDS``, the case's before view is empty (a namespace typo, another
    tenant's namespace, an actor of another deployment; on AgentCore every actor id "has"
    the strategies' namespaces, so a view is what tells): its actor, every namespace;
    ``TARGET_ABSENT``, a must-retrieve id that is no record of the case's actor (and
    namespace), nor the original of one of its replacements, nor erased: the case's scope. An ``erased`` case may watch a namespace its erasure
    emptied: not one of them. A case that cannot read its view is left to run_set."""
    out: list[dict[str, Any]] = []
    for c in cases:
        names = [c.namespace] if c.namespace is not None else recall.namespaces(c.actor_id)
        try:
            empty = all(not recall.corpus(c.actor_id, ns, include=include).ids for ns in names)
        except CorruptRecordError:
            continue  # unreadable: reported and withheld as such
        # an erasure case may watch a view its erasure emptied: of an actor of this store
        if empty and (c.kind is not CaseKind.erased or not _known(recall, c.actor_id, include)):
            out.append({"case": c.id, "actor_id": c.actor_id, "namespace": None,
                        "code": "NO_RECORDS"})  # fmt: skip
            continue
        for t in c.must_retrieve:
            r = recall.store.get(t.id) if t.id is not None else None
            if (
                t.id is not None
                and (
                    r is None or r.actor_id != c.actor_id or c.namespace not in (None, r.namespace)
                )
                and not _named_still(recall, c, t.id, names, include)
            ):
                out.append({"case": c.id, "actor_id": c.actor_id, "namespace": c.namespace,
                            "code": "TARGET_ABSENT", "record_id": t.id})  # fmt: skip
                break
        else:
            if rid := _forbidden_elsewhere(recall, c):
                out.append({"case": c.id, "actor_id": c.actor_id, "namespace": c.namespace,
                            "code": "TARGET_ELSEWHERE", "record_id": rid})  # fmt: skip
    return out


def _forbidden_elsewhere(recall: ShadowRecall, case: EvalCase) -> str | None:
    """A forbidden id that is a record the case's recall can never return: another actor's,
    or (a case naming a namespace) one of another namespace; unless the case's actor erased
    that id (a tombstone: an erasure watch). Such a target passes whatever the run does, so
    the case checks nothing (audit 49iii: a case copied from another tenant gated the run)."""
    from memlife.tombstones import listing

    for t in case.forbidden:
        r = recall.store.get(t.id) if t.id is not None else None
        if r is None or (r.actor_id == case.actor_id and case.namespace in (None, r.namespace)):
            continue
        if not any(x["record_id"] == r.id for x in listing(recall.store, case.actor_id)):
            return r.id
    return None


def _known(recall: ShadowRecall, actor: str, include: frozenset[str]) -> bool:
    """The actor has a record here, or erased one here (a tombstone): an erasure case of
    an actor this store never knew (another deployment's set) checks nothing."""
    from memlife.tombstones import listing

    names = recall.namespaces(actor)
    return any(recall.corpus(actor, ns, include=include).ids for ns in names) or bool(
        listing(recall.store, actor)
    )


def _named_still(
    recall: ShadowRecall, case: EvalCase, rid: str, names: Sequence[str], include: frozenset[str]
) -> bool:
    """An id no record holds any more that a case may still name: the original of an active
    replacement in the case's view (deleted after its retention: recall's lineage still
    finds it), or a record its actor erased (a tombstone: the case fails and warns)."""
    from memlife.tombstones import listing

    views = [recall.corpus(case.actor_id, ns, include=include) for ns in names]
    if any(rid in recall.lineage(r) for v in views for r in v.records):
        return True
    return any(t["record_id"] == rid for t in listing(recall.store, case.actor_id))


def blocking_actors(
    before: dict[str, Any],
    after: dict[str, Any],
    cases: Sequence[EvalCase],
    owners: Mapping[str, str],
    deletions: Iterable[str],
) -> list[str]:
    """The actors whose deletions are held back: those of the cases ``after`` made worse
    that own a deletion (recall is scoped to the case's actor: another actor's deletion
    cannot move it). The caller re-runs the gate without them before it trusts the list."""
    was = {r["id"]: r for r in before["results"]}
    actor = {c.id: c.actor_id for c in cases}
    worse = {actor[r["id"]] for r in after["results"] if r["id"] in was
             and _worse_case(was[r["id"]], r)}  # fmt: skip
    return sorted(worse & {owners.get(d, "") for d in deletions})


MAX_TRIED_ALONE = 64  # suspect groups blocking_groups evaluates one by one


def _worse_case(before: dict[str, Any], after: dict[str, Any]) -> bool:
    return (
        (before["passed"] and not after["passed"])
        or after["score"] < before["score"]
        or (after["contradiction"] and not before["contradiction"])
    )


def blocking_groups(
    cases: Sequence[EvalCase],
    gate: GatePolicy,
    before: dict[str, Any],
    groups: Sequence[tuple[str, Sequence[str]]],
    scope: dict[str, tuple[str, str]],
    after: Callable[[frozenset[str], Sequence[EvalCase]], dict[str, Any]],
) -> list[str]:
    """The staged groups that block the supersedes (their replacement ids), or [] when they
    cannot be told apart. A group moves only the cases of its own actor (recall is scoped to
    it), so each group in the scope of a case the run made worse is tried alone on those
    cases: named when it makes one worse (when none does alone, all of them are named). The
    gate re-run on the other groups must then pass, or none is named.
    ``after(exclude, cases)``: run_set on the after view (replacements not excluded added)."""
    replacements = frozenset(rid for rid, _ in groups)

    def view(chosen: Sequence[tuple[str, Sequence[str]]]) -> frozenset[str]:
        keep = {rid for rid, _ in chosen}
        return frozenset({s for _, sups in chosen for s in sups} | (replacements - keep))

    def in_scope(rid: str, c: EvalCase) -> bool:
        actor, ns = scope.get(rid, ("", ""))
        return c.actor_id == actor and c.namespace in (None, ns)

    def hurts(results: Sequence[dict[str, Any]]) -> set[str]:
        return {r["id"] for r in results if _worse_case(was[r["id"]], r)}

    was = {r["id"]: r for r in before["results"]}
    hurt = hurts(after(view(groups), cases)["results"])
    suspects = [g for g in groups if any(in_scope(g[0], c) for c in cases if c.id in hurt)]
    if len(suspects) > MAX_TRIED_ALONE:
        return []  # too many to try one by one: none is named (all re-staged next night)
    named = [
        g
        for g in suspects
        if hurts(after(view([g]), [c for c in cases if in_scope(g[0], c)])["results"])
    ] or suspects
    rest = [g for g in groups if g not in named]
    if not named or verdict(before, after(view(rest), cases), 0, gate)["blocked"]:
        return []
    return sorted(rid for rid, _ in named)
