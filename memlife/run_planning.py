"""Steps 2-7 for a batch of shards: page, expire, score, group, plan, report, stage.

Nothing is written to the store here (an apply run's replacements are computed and held
in the batch outcome): the regression gate looks at everything staged first.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, TypeVar

from memlife import progress
from memlife.apply import DeleteItem, Executor, StagedGroup, Tally, carry
from memlife.backends import embedding_cache
from memlife.derived import flush_for
from memlife.embed_cache import EmbeddingCache
from memlife.erase_sweep import sweep_after_write
from memlife.errors import InputError, StoreError, is_throttling
from memlife.gate import OBLIGATIONS
from memlife.journal import OpKind
from memlife.model import Link, MemoryRecord, PlanView, link_of, plan_view
from memlife.orphans import sources_follow
from memlife.pinned import hold_pinned
from memlife.plan import DELETE_ACTIONS, Action, Decision, Planner, Reason, ShardHints
from memlife.report import ReportWriter
from memlife.review_queue import ReviewQueue, item_id, legacy_item_id
from memlife.review_queue.candidates import ReviewCandidates
from memlife.run_types import BatchOutcome, RunContext, Shard
from memlife.settings import settings
from memlife.stores import MemoryStore, iter_shard
from memlife.superseded_since import count_from_supersede

if TYPE_CHECKING:
    from memlife.ledger_merge import ActorStats

T = TypeVar("T")


def iter_views(
    store: MemoryStore,
    shard: Shard,
    page_size: int,
    access_stats: ActorStats | None = None,
    links: dict[str, Link] | None = None,
) -> Iterator[list[PlanView]]:
    """Pages of planning views (the store's fast path where it has one), with ledger stats
    merged. ``links`` receives each record's hold and replacement links where whole records
    are read anyway (no fast path: AgentCore), so the pin check reads none of them again."""
    merge = None
    if access_stats:
        from memlife.ledger_merge import merge_into_views

        merge = lambda views: merge_into_views(views, access_stats)  # noqa: E731
    fast = getattr(store, "page_views", None)
    if fast is None:
        native = getattr(store, "native_ids", None)  # AgentCore: CloudTrail names native ids
        for p in iter_shard(store, shard.actor_id, shard.namespace, page_size=page_size):
            views = [plan_view(r) for r in p.records]
            if links is not None:
                links.update((r.id, link_of(r)) for r in p.records)
            if access_stats and native is not None:
                views = _merge_native(views, native([v.id for v in views]), access_stats)
            yield merge(views) if merge else views
        return
    token: str | None = None
    while True:
        views, token = fast(shard.actor_id, shard.namespace, page_size=page_size, token=token)
        yield merge(views) if merge else views
        if token is None:
            return


def _merge_native(
    views: list[PlanView], native: dict[str, str], stats: ActorStats
) -> list[PlanView]:
    """Credit ledger rows keyed by a store-native id (CloudTrail) to our record ids."""
    aliased = {
        (v.actor_id, v.id): stats[(v.actor_id, native[v.id])]
        for v in views
        if v.id in native and (v.actor_id, native[v.id]) in stats
    }
    if not aliased:
        return views
    from memlife.ledger_merge import merge_into_views

    return merge_into_views(views, aliased)


def plan_shard(
    ctx: RunContext,
    store: MemoryStore,
    shard: Shard,
    planner: Planner | None = None,
    read: dict[str, MemoryRecord] | None = None,
    views: dict[str, PlanView] | None = None,
) -> list[Decision]:
    """Steps 2-5 for one shard: page it, infer missing subjects, then expire/score/group/plan.
    ``read`` receives the records inference read (staging need not read them again),
    ``views`` the planning views by id (staging's derived-cache digests)."""
    planner = planner or Planner(ctx.policy, ctx.cutoff)
    links: dict[str, Link] = {}
    pages = list(iter_views(store, shard, ctx.config.page_size, ctx.access_stats, links))
    if views is not None:
        views.update((v.id, v) for p in pages for v in p)
    hints = shard_hints(ctx, store, shard, pages, read)
    decisions = planner.plan_shard(pages, hints)
    # the planner reads no provenance: a held source's replacement is held here (pinned.py),
    # and a superseded record whose replacement is deleted goes with it (orphans.py)
    views_of = [v for p in pages for v in p]
    # superseded retention counts real time since the supersede (a catch-up run's cutoff
    # lies months back: superseded_since.py); before the pins and orphans that follow it
    decisions = count_from_supersede(store, ctx.policy, ctx.cutoff, views_of, decisions)
    decisions = hold_pinned(store, views_of, decisions, links)
    return sources_follow(store, views_of, decisions, links, hints.disputed)


KEEP_READ = 4096  # records of a shard handed from inference to staging, at most


def shard_hints(
    ctx: RunContext,
    store: MemoryStore,
    shard: Shard,
    pages: Sequence[Sequence[PlanView]],
    read: dict[str, MemoryRecord] | None = None,
) -> ShardHints:
    """Inferred subjects for records without one (group.infer_subjects; stored as inferred in
    apply runs) and the review queue's disputed records. Reads content only when needed;
    what it read goes to ``read`` (up to KEEP_READ records)."""
    from memlife.inferred import InferredSubjects, needs_inference

    write = not ctx.config.dry_run
    disputed = review_queue(ctx, store).disputed(shard.actor_id, shard.namespace)
    views = [v for p in pages for v in p]
    todo = needs_inference(views) if ctx.policy.inference.enabled else []
    if len(todo) < 2:
        return ShardHints(disputed=disputed)
    from memlife.inferred.cached import infer_shard

    table = per_store(
        ctx, store, "inferred", lambda: InferredSubjects.for_store(store, create=write)
    )
    by_id = {v.id: v for v in views}
    found = infer_shard(store, (shard.actor_id, shard.namespace), [by_id[i] for i in todo],
                        table.get((shard.actor_id, shard.namespace), todo), ctx.policy, embeddings_for(ctx, store), read, KEEP_READ,
                        stores_new=write)  # fmt: skip
    if write:
        table.put(shard.actor_id, shard.namespace, found.new, "nightly")
    answered = _answered_updates(ctx, store, shard, found.updates, by_id)
    updates = _unanswered(ctx, store, shard, found.updates, by_id)
    return ShardHints(found.subjects, found.statements, updates, disputed, answered)


_HUMAN = frozenset({"keep", "verify", "dispute"})  # a person's answer the model may not undo


def _answered_updates(
    ctx: RunContext, store: MemoryStore, shard: Shard, updates: Mapping[str, str],
    by_id: Mapping[str, PlanView],
) -> frozenset[str]:  # fmt: skip
    """Older ids of ``updates`` (older -> newer) whose POSSIBLE_UPDATE item a reviewer
    answered for this very pair and the text the older record still holds (audit 47j: with
    a model key set later, the model superseded what the person kept, and closed a
    dispute)."""
    if not updates:
        return frozenset()
    items = review_queue(ctx, store).for_records(
        [(o, shard.actor_id, shard.namespace) for o in updates]
    )
    return frozenset(
        i.record_id for i in items
        if i.reason == "POSSIBLE_UPDATE" and i.decision in _HUMAN
        and i.pair_id in (None, updates.get(i.record_id))
        and i.record_id in by_id and i.content_sha256 == by_id[i.record_id].content_sha256
    )  # fmt: skip


def _unanswered(
    ctx: RunContext, store: MemoryStore, shard: Shard, updates: dict[str, str],
    by_id: Mapping[str, PlanView],
) -> dict[str, str]:  # fmt: skip
    """``updates`` less the pairs a reviewer answered under another id (audit 50k): the
    older record's POSSIBLE_UPDATE item was answered (keep, verify, dispute) against B for
    the text it still holds, and tonight's newer record is B's replacement holding B's very
    text (B merged with its word-for-word restatement). That is the question the person
    answered: asked again offline, or handed to the model, whose `update` superseded the
    record the person kept. A replacement that says anything else is a new question."""
    items = review_queue(ctx, store).for_records(
        [(o, shard.actor_id, shard.namespace) for o in updates]
    ) if updates else []  # fmt: skip
    same = {
        i.record_id for i in items
        if i.reason == "POSSIBLE_UPDATE" and i.decision in _HUMAN and i.pair_id
        and i.pair_id != updates.get(i.record_id)
        and i.record_id in by_id and i.content_sha256 == by_id[i.record_id].content_sha256
        and _stands_for(store, shard, by_id, i.pair_id, updates[i.record_id])
    }  # fmt: skip
    return {o: n for o, n in updates.items() if o not in same} if same else updates


def _stands_for(
    store: MemoryStore, shard: Shard, by_id: Mapping[str, PlanView], old: str, new: str
) -> bool:
    """``new`` is ``old``'s replacement (through replacements, each holding ``old``'s very
    text) in the shard's own actor and namespace. A record of the chain deleted since
    (superseded retention, 90 days by default) is read from its supersede in the journal:
    with the store alone the answer lapsed with it, and the pair was asked again or
    handed to the model (audit 53b)."""
    links = None

    def hop(at: str) -> tuple[str | None, str | None] | None:
        """(``at``'s text, its replacement), or None: another tenant's, or unknown."""
        nonlocal links
        rec = store.get(at)
        if rec is not None:
            if (rec.actor_id, rec.namespace) != (shard.actor_id, shard.namespace):
                return None
            return by_id[at].content_sha256 if at in by_id else None, rec.provenance.replaced_by
        if links is None:
            from memlife.journal import open_supersede_link

            links = open_supersede_link(store) or (lambda *_: None)
        return links(at, shard.actor_id, shard.namespace)

    first = hop(old)
    if first is None or first[0] is None:
        return False
    text, nxt = first
    for _ in range(8):  # a chain of restatements merged night after night; bounded
        if nxt is None:
            return False
        if nxt == new:
            return nxt in by_id and by_id[nxt].content_sha256 == text
        step = hop(nxt)
        if step is None or step[0] != text:
            return False
        nxt = step[1]
    return False


def review_queue(ctx: RunContext, store: MemoryStore) -> ReviewQueue:
    """The store's review queue, opened once a run (a dry run creates nothing)."""
    from memlife.review_queue import ReviewQueue

    write = not ctx.config.dry_run
    return per_store(ctx, store, "reviews", lambda: ReviewQueue.for_store(store, create=write))


def per_store(ctx: RunContext, store: MemoryStore, name: str, open_: Callable[[], T]) -> T:
    """A table opened once per run and store (the review queue, inferred subjects): a dry
    run on a store without one builds an empty in-memory copy each time (2-3 ms a shard)."""
    cached = ctx.__dict__.get("_" + name)
    if cached is None or cached[0] is not store:
        cached = ctx.__dict__["_" + name] = (store, open_())
    return cached[1]


def embeddings_for(ctx: RunContext, store: MemoryStore) -> EmbeddingCache:
    """One embedding cache per run (process), opened on first use."""
    cache = ctx.__dict__.get("_embeddings")
    if cache is None:
        cache = ctx.__dict__["_embeddings"] = make_embeddings(ctx, store)
    return cache


def make_embeddings(ctx: RunContext, store: MemoryStore) -> EmbeddingCache:
    """The per-record embedding cache: in the store's file for apply runs; a dry run keeps
    its own file so that it leaves the store file byte-identical."""
    if ctx.config.dry_run and getattr(store, "connection", None) is not None:
        return EmbeddingCache(path=settings().home / "embeddings.db", recent=RECENT_VECTORS)
    return embedding_cache(store, recent=RECENT_VECTORS)


# vectors kept in memory by a run's cache (~6 MB): a shard's groups ask again for what its
# subject inference just read (episodes), and SQLite reads each back at ~15-30 us
RECENT_VECTORS = 4096


def written_by_run(ctx: RunContext, executor: Executor | None) -> frozenset[str]:
    """The replacements an earlier attempt of this run wrote (empty on a first attempt).

    A rerun plans the store as the run left it, its own replacements included (the
    other records' decisions, and so the counts, are the first attempt's), but opens no
    review item about them (:func:`reviewable`): the first attempt never saw them, and the
    next night plans them like any record. Read once a process from the run's journal."""
    if executor is None or ctx.config.dry_run:
        return frozenset()
    cached = ctx.__dict__.get("_written")
    if cached is None:
        ops = executor.journal.by_run(ctx.run_id)
        cached = ctx.__dict__["_written"] = frozenset(
            o.record_id for o in ops if o.kind is OpKind.write_replacement
        )
    return cached


def reviewable(
    decisions: Sequence[Decision], written: frozenset[str]
) -> tuple[Sequence[Decision], list[str]]:
    """The findings the first attempt could have made (``written``: :func:`written_by_run`):
    none about the run's own replacements; a record whose POSSIBLE_UPDATE pair is one loses
    that finding only (its other findings stand, as the first attempt found them). Also the
    ids of the items left out that way (an open one is not "no longer found": review_sweep)."""
    if not written:
        return decisions, []
    out, withheld = [], []
    for d in decisions:
        if d.id in written:
            continue
        if d.pair is not None and d.pair in written:
            rest: list[Reason] = [r for r in d.reasons if r is not Reason.POSSIBLE_UPDATE]
            d = dataclasses.replace(d, reasons=rest, pair=None)
            code = Reason.POSSIBLE_UPDATE.value
            withheld += [item_id(d.id, code, d.actor_id, d.namespace), legacy_item_id(d.id, code)]
        out.append(d)
    return out, withheld


def _deletions(ctx: RunContext, decisions: Sequence[Decision], tally: Tally) -> list[DeleteItem]:
    """Delete decisions in enforced namespaces; the rest are proposals, recorded as not deleted."""
    items = []
    for d in decisions:
        if d.action in DELETE_ACTIONS:
            if ctx.policy.deletion_enforced(d.namespace):
                items.append(DeleteItem(d.id, d.actor_id, d.namespace,
                                        tuple(r.value for r in d.reasons), d.content_sha256))  # fmt: skip
            else:
                tally.ids_not_deleted.append({"id": d.id, "reason": "NOT_ENFORCED"})
                tally.counts["proposed_deletions"] += 1
        elif d.action is Action.hold and Reason.DELETE_DEFERRED in d.reasons:
            why = "HELD_SOURCE" if Reason.HELD_SOURCE in d.reasons else "LEGAL_HOLD"
            tally.ids_not_deleted.append({"id": d.id, "reason": why})
    return items


def process_batch(
    ctx: RunContext,
    store: MemoryStore,
    shards: Sequence[Shard],
    report: ReportWriter,
    executor: Executor | None = None,
) -> BatchOutcome:
    """Plan a batch of shards, report their decisions, stage their consolidations and
    deletions. Nothing is written to the store here: the gate looks first (commit_run).

    A failing shard is recorded and skipped; the other shards go on. A throttled attempt's
    model spend and journaled verdicts are carried to the attempt that ends the batch
    (memlife/apply/carry.py: its retry would read them as an earlier night's).
    """
    rv = ctx.policy.review
    out = BatchOutcome(reviews=ReviewCandidates(
        rv.nightly_budget, keep_lapse(ctx), rv.waiting_listed, rv.waiting_priority_per_day,
        ctx.cutoff,
    ))  # fmt: skip
    key = carry.key_of(ctx, shards)
    earlier = carry.take(key)
    try:
        _plan_batch(ctx, store, shards, report, executor, out)
    except Exception as exc:
        if is_throttling(exc):
            carry.leave(key, out.tally, earlier, exc)
        raise
    carry.join(earlier, out.tally)
    out.tally.verdicts.clear()  # needed by a retry only: not held to the run's end
    out.tally.standins.clear()
    return out


def _plan_batch(
    ctx: RunContext,
    store: MemoryStore,
    shards: Sequence[Shard],
    report: ReportWriter,
    executor: Executor | None,
    out: BatchOutcome,
) -> None:
    from memlife.consolidate.extractive import ExtractiveConsolidator

    # a model judges possible updates (duplicate / update / complement); offline: review
    c = executor.consolidator if executor is not None else None
    # a dry run's extractive stand-in for the model (judge_additive off) plans as the model
    # would: the pair goes to it in the apply run, not to review (audit 47q)
    model = c is not None and (not isinstance(c, ExtractiveConsolidator) or not c.judge_additive)
    planner = Planner(ctx.policy, ctx.cutoff, model_decides=model)
    written = written_by_run(ctx, executor)
    if executor is not None:  # an earlier attempt of this batch left its own failures
        executor.retrying_batch([(s.actor_id, s.namespace) for s in shards])
    for shard in shards:
        try:
            read: dict[str, MemoryRecord] = {}  # what planning read: staging reuses it
            views: dict[str, PlanView] = {}
            decisions = plan_shard(ctx, store, shard, planner, read, views)
            report.write(decisions)
            findings, withheld = reviewable(decisions, written)
            out.reviews.add(findings, review_queue(ctx, store).backend)
            out.reviews.withheld += withheld
            if executor is not None:
                staged = executor.stage_shard(decisions, out.tally, read, views)
                if ctx.config.dry_run and not ctx.config.eval_cases:
                    # no gate, no commit: only where each group is counts (withheld groups),
                    # not its records and operations (about 1 KB a record held to the end;
                    # stage_group builds none there: they come back as StagedRefs)
                    out.staged_refs.update(g.shard[1] for g in staged)
                else:  # StagedRefs come only from such dry runs
                    out.staged += [g for g in staged if isinstance(g, StagedGroup)]
            if not ctx.config.dry_run or ctx.config.eval_cases:  # deletes, or the gate's candidates
                out.deletions += _deletions(ctx, decisions, out.tally)
            else:  # counted only: what an apply run's gate would withhold or let go ahead
                out.deletion_refs.update(
                    "obligation" if any(r.value in OBLIGATIONS for r in d.reasons) else "judgement"
                    for d in decisions
                    if d.action in DELETE_ACTIONS and ctx.policy.deletion_enforced(d.namespace)
                )
                # where deletion is not enforced an apply run only proposes (as _deletions)
                out.tally.counts["proposed_deletions"] += sum(
                    1 for d in decisions
                    if d.action in DELETE_ACTIONS and not ctx.policy.deletion_enforced(d.namespace)
                )  # fmt: skip
        except (StoreError, InputError, OSError) as exc:
            # Bad data (InputError; a stored record that does not decode: CorruptRecordError,
            # a StoreError) or a store failure stops this shard only; the rest of the run goes
            # on. Anything else (a ValueError from our own code) is a bug: it propagates, and
            # a Prefect task reports its shard as crashed (fanout). Ids and codes only here.
            more = {n: getattr(exc, n) for n in ("record_id", "field")
                    if getattr(exc, n, None) is not None}  # fmt: skip
            out.failed_shards.append(shard.failed(getattr(exc, "code", type(exc).__name__), **more))
            continue
        except (KeyError, TypeError, ValueError):  # after InputError, itself a ValueError
            # planning reads stored rows by position, unchecked (the hot path): a row it could
            # not read is looked for now; found, the shard stops like any bad record, else
            # this is a bug in our own code and propagates
            found = getattr(store, "corrupt_row", None)
            corrupt = found(shard.actor_id, shard.namespace) if found is not None else None
            if corrupt is None:
                raise
            out.failed_shards.append(
                shard.failed(corrupt.code, record_id=corrupt.record_id, field=corrupt.field)
            )
            continue
        out.counts.update(str(d.action) for d in decisions)
        out.records += len(decisions)
        out.shards += 1
        progress.advance(len(decisions))
    if executor is not None:  # groups the model failed while it answered others: theirs
        executor.judge_unavailable(out.tally, [(s.actor_id, s.namespace) for s in shards])
    cache = ctx.__dict__.get("_embeddings")
    flush_for(cache)  # derived results of this batch, one commit
    if ctx.config.dry_run:  # no lease: an erasure may have run meanwhile (erase_sweep.py)
        sweep_after_write(store, cache, {s.actor_id for s in shards}, ctx.started_at)
    out.reviews.compact(review_queue(ctx, store).backend)  # held until the queue step


def open_report(ctx: RunContext) -> ReportWriter:
    return ReportWriter(ctx.report_dir)


def keep_lapse(ctx: RunContext) -> datetime | None:
    """A reviewer's `keep` on a finding time brings, resolved before this, no longer answers
    it (ReviewPolicy.keep_answers_days; None: for good)."""
    days = ctx.policy.review.keep_answers_days
    return None if days is None else ctx.cutoff - timedelta(days=days)
