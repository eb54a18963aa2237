"""Steps 8-9: the regression gate on everything staged, then commit what it allows, and
the review queue. The gate itself (memlife.gate) knows nothing of runs: this module
loads its cases, picks its answerer and takes the quarantine snapshot.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from memlife import gate
from memlife.apply import DeleteItem, Executor, StagedGroup, Tally
from memlife.consolidate.replacement import past_lifetime
from memlife.evalset import EvalCase, cases_digest, load_cases
from memlife.faults import checkpoint
from memlife.run_planning import make_embeddings
from memlife.run_receipts import completed_status
from memlife.run_types import BatchOutcome, RunContext
from memlife.stores import MemoryStore

if TYPE_CHECKING:
    from memlife.review_queue import ReviewItem, ReviewQueue

GateFn = Callable[[RunContext, MemoryStore, Sequence[DeleteItem]], dict[str, Any]]


def _obligation(item: DeleteItem) -> bool:
    return any(r in gate.OBLIGATIONS for r in item.reasons)


def ungated(
    ctx: RunContext, outcomes: Sequence[BatchOutcome]
) -> tuple[list[DeleteItem], list[StagedGroup], int]:
    """What a run without an evaluation set must withhold (policy gate.required): every
    judgement in an enforced namespace: deletions other than obligations (hard expiry, a
    user's forget), and consolidations (staged groups, and how many a dry run only counted).
    Obligations go ahead."""
    if ctx.config.eval_cases or not ctx.policy.gate.required:
        return [], [], 0
    enforced = ctx.policy.deletion_enforced
    items = [i for o in outcomes for i in o.deletions if not _obligation(i)]
    groups = [g for o in outcomes for g in o.staged if enforced(g.shard[1])]
    counted = sum(n for o in outcomes for ns, n in o.staged_refs.items() if enforced(ns))
    return items, groups, counted


def counted_judgements(ctx: RunContext, outcomes: Sequence[BatchOutcome]) -> int:
    """Judgement deletions a dry run without an evaluation set only counted (deletion_refs)
    that an apply run would withhold (``ungated``'s items, counted)."""
    if ctx.config.eval_cases or not ctx.policy.gate.required:
        return 0
    return sum(o.deletion_refs["judgement"] for o in outcomes)


def went_ungated(ctx: RunContext, outcomes: Sequence[BatchOutcome]) -> tuple[int, int]:
    """(deletions, consolidations) a run without an evaluation set lets go ahead unevaluated:
    obligations, and consolidations outside the enforced namespaces (all of both when the
    policy does not require the gate). Counts only: the gate line and receipt say them."""
    withheld, _, _ = ungated(ctx, outcomes)
    dels = sum(len(o.deletions) for o in outcomes) - len(withheld)
    dels += sum(o.deletion_refs.total() for o in outcomes) - counted_judgements(ctx, outcomes)
    enforced = ctx.policy.deletion_enforced
    required = ctx.policy.gate.required
    staged = sum(1 for o in outcomes for g in o.staged if not (required and enforced(g.shard[1])))
    counted = sum(n for o in outcomes for ns, n in o.staged_refs.items()
                  if not (required and enforced(ns)))  # fmt: skip
    return dels, staged + counted


def uncovered(
    ctx: RunContext,
    outcomes: Sequence[BatchOutcome],
    cases: Sequence[EvalCase],
    unchecked: Sequence[dict[str, Any]],
) -> dict[str, list[str]]:
    """Judgements an evaluation set cannot see at all: when every case of the set checks
    nothing here (``unchecked``: gate.coverage's cases, their view empty or a target absent:
    a set written for another deployment, a typo in every actor id or namespace; or cases
    no view could read, a damaged row in their shard), the set
    would still satisfy a required gate; what it would have gated waits, as without a set
    (GATE_UNCOVERED). A set that samples some actors gates the whole run, as a regression
    test does: per-actor coverage is not asked for."""
    nothing: dict[str, list[str]] = {"deletions": [], "groups": []}
    if not ctx.policy.gate.required or {u["case"] for u in unchecked} != {c.id for c in cases}:
        return nothing
    return judgements(ctx, outcomes)


def judgements(ctx: RunContext, outcomes: Sequence[BatchOutcome]) -> dict[str, list[str]]:
    """Every judgement a set that checks nothing holds back (``uncovered``): deletions other
    than obligations, and the groups staged in enforced namespaces."""
    enforced = ctx.policy.deletion_enforced
    return {
        "deletions": sorted(i.id for o in outcomes for i in o.deletions if not _obligation(i)),
        "groups": sorted(
            g.replacement.id for o in outcomes for g in o.staged if enforced(g.shard[1])
        ),
    }


def unseen_by(
    held: dict[str, list[str]], unread: Sequence[dict[str, Any]], outcomes: Sequence[BatchOutcome]
) -> None:
    """Add to ``held`` the judgements a case that could not read its shard, or that checks
    nothing (gate.coverage), would have seen: in that case's namespace, or every namespace
    of its actor when it names none (or names one its actor has no record in). No judgement
    is made there unevaluated; obligations and the rest of the run go on."""
    if not unread:
        return
    scopes = {(u["actor_id"], u["namespace"]) for u in unread}

    def seen(actor: str, namespace: str) -> bool:
        return (actor, namespace) in scopes or (actor, None) in scopes

    # judgements only: an obligation (hard expiry, a user's forget) goes ahead, as without a set
    deletions = {
        i.id for o in outcomes for i in o.deletions
        if seen(i.actor_id, i.namespace) and not _obligation(i)
    }  # fmt: skip
    groups = {g.replacement.id for o in outcomes for g in o.staged if seen(*g.shard)}
    held["deletions"] = sorted(set(held["deletions"]) | deletions)
    held["groups"] = sorted(set(held["groups"]) | groups)


def run_gate(
    ctx: RunContext, store: MemoryStore, outcomes: Sequence[BatchOutcome]
) -> dict[str, Any]:
    """Step 8: the before/after regression gate on everything the run staged. When it holds
    the deletions back, their records are snapshotted first (so a restore is exact)."""
    if not ctx.config.eval_cases:
        items, groups, counted = ungated(ctx, outcomes)
        # apply runs withhold such groups before staging them (groups.withheld_by_gate)
        early = sum(o.tally.counts.get("gate_withheld_groups", 0) for o in outcomes)
        withheld = len(items) + counted_judgements(ctx, outcomes)
        verdict = gate.not_configured(ctx.policy.gate, withheld, len(groups) + counted + early)
        verdict["ungated_deletions"], verdict["ungated_groups"] = went_ungated(ctx, outcomes)
        return verdict
    # with an evaluation set every staged group is whole (refs: dry runs without one)
    staged = [g for o in outcomes for g in o.staged]
    deletions = sorted({i.id for o in outcomes for i in o.deletions})
    paid = not ctx.config.dry_run or ctx.config.with_model  # a dry run calls no model unasked
    cases = load_cases(ctx.config.eval_cases)
    ttl = ctx.policy.ttl_days()
    verdict = gate.evaluate_changes(
        store,
        cases,
        ctx.policy.gate,
        deletions=deletions,
        superseded=[rid for g in staged for rid in g.superseded_ids],
        replacements=[g.replacement for g in staged],
        cache=make_embeddings(ctx, store) if ctx.config.dry_run else None,
        answerer=gate.model_answerer_from_env() if paid else None,
        groups=[(g.replacement.id, g.superseded_ids) for g in staged],
        owners={i.id: i.actor_id for o in outcomes for i in o.deletions},
        # what online recall never serves (past its deadline, kept by a hold or an
        # unenforced namespace) answers no case in either view
        hidden=lambda r: past_lifetime(r, ttl, ctx.cutoff),
    )
    # the set this verdict judged: the memo of a blocked group is keyed by it (commit_run)
    verdict["eval_digest"] = cases_digest(cases)
    unchecked = verdict["uncovered_cases"]
    # a case no view could read checks nothing either: a set of such cases alone is no set
    # (it let another tenant's judgements go ahead, judged by 0 cases: audit 53iii)
    verdict["uncovered"] = uncovered(
        ctx, outcomes, cases, [*unchecked, *verdict["unreadable_cases"]]
    )
    unseen_by(verdict["uncovered"], [*verdict["unreadable_cases"], *unchecked], outcomes)
    verdict["held_back"] = held_back(verdict, outcomes)
    if verdict["deletions_blocked"] and not ctx.config.dry_run:
        from memlife.quarantine import snapshot

        snapshot(store, [i.id for o in outcomes for i in held_deletions(verdict, o.deletions)])
    return verdict


def groups_blocked(verdict: dict[str, Any]) -> bool:
    """The verdict holds back every staged group (a verdict of before the split: blocked)."""
    return bool(
        verdict.get("supersedes_blocked")
        or verdict.get("blocked") and "supersedes_blocked" not in verdict
    )  # fmt: skip


def held_back(verdict: dict[str, Any], outcomes: Sequence[BatchOutcome]) -> dict[str, int]:
    """How many deletions and groups this verdict keeps from the store (commit_run): blocked
    (quarantined, supersedes undone) or uncovered (waiting). A dry run's "an apply run
    would" figures are net of them (memlife/would_change.py)."""
    uncovered = verdict.get("uncovered") or {}
    items = [i for o in outcomes for i in o.deletions]
    blocked = {i.id for i in held_deletions(verdict, items)}
    deletions = blocked | set(uncovered.get("deletions", ()))
    staged = {g.replacement.id for o in outcomes for g in o.staged}
    groups = staged if groups_blocked(verdict) else staged & set(uncovered.get("groups", ()))
    # quarantined: the blocked ones (a dry run's gate line says what the apply run would do)
    return {"deletions": len(deletions), "groups": len(groups), "quarantined": len(blocked)}


def held_deletions(verdict: dict[str, Any], items: Sequence[DeleteItem]) -> list[DeleteItem]:
    """The deletions a blocking verdict holds back: those of ``blocking_actors`` when the
    gate named them (recall is actor-scoped: another tenant's obligations go ahead), else
    all of them."""
    if not verdict.get("deletions_blocked", verdict.get("blocked")):
        return []
    actors = verdict.get("blocking_actors")
    return [i for i in items if i.actor_id in actors] if actors else list(items)


def _dels_blocked(verdict: dict[str, Any]) -> bool:
    return bool(verdict.get("deletions_blocked", verdict.get("blocked")))


def under_kept(
    store: MemoryStore,
    outcomes: Sequence[BatchOutcome],
    own: dict[str, Any],
    kept: dict[str, Any] | None,
    *,
    ctx: RunContext | None = None,
) -> dict[str, Any]:
    """The verdict a rerun commits under: the stricter of the night's kept verdict
    (memlife/evidence_gate.py) and this attempt's ``own``. The receipt reports the kept
    one; committing under ``own`` alone let a rerun delete or supersede what the night's
    gate held back, once the store had changed since (audit 53gr). Held by either: held
    (its blocking actors, blocked groups and uncovered ids read back from the kept file).
    What only the kept verdict holds back is snapshotted here, as run_gate does its own."""
    if (
        kept is None
        or kept is own
        or not (own.get("configured", True) and kept.get("configured", True))
    ):
        return own  # one run key holds one set path: both verdicts are judged with a set, or none
    out = dict(own)
    both = (kept, own)
    dels, sups = any(_dels_blocked(v) for v in both), any(groups_blocked(v) for v in both)
    out["deletions_blocked"], out["supersedes_blocked"] = dels, sups
    out["blocked"] = dels or sups or any(v.get("blocked") for v in both)
    named = [v.get("blocking_actors") for v in both if _dels_blocked(v)]
    out.pop("blocking_actors", None)
    if dels and all(named):  # each names its actors: theirs wait; one naming none holds all
        out["blocking_actors"] = sorted({a for actors in named for a in actors or ()})
    out["uncovered"] = {
        part: sorted({i for v in both for i in (v.get("uncovered") or {}).get(part, ())})
        for part in ("deletions", "groups")
    }
    # the kept verdict held by scope, not by id: what this attempt judges where its cases
    # checked nothing waits, whatever its id. A group that gained a member since (an
    # import of a statement dated before the cutoff) has another replacement id, and a
    # record imported there is no id of the night's: both went ahead (audit 53r2)
    unread = [*(kept.get("uncovered_cases") or ()), *(kept.get("unreadable_cases") or ())]
    if unread and ctx is not None and ctx.policy.gate.required and not kept.get("cases"):
        # no case of the night's set ran at all: every judgement waited (``uncovered``)
        whole = judgements(ctx, outcomes)
        out["uncovered"] = {p: sorted({*out["uncovered"][p], *whole[p]}) for p in whole}
    unseen_by(out["uncovered"], unread, outcomes)
    # the memo of a blocked group is keyed by the set that blocked it: the kept verdict's
    # names count only where it judged with the set this attempt read
    same = kept.get("eval_digest") == own.get("eval_digest")
    out["blocking_groups"] = sorted(
        {*own.get("blocking_groups", ()), *(kept.get("blocking_groups", ()) if same else ())}
    )
    items = [i for o in outcomes for i in o.deletions]
    mine = {i.id for i in held_deletions(own, items)}
    more = [i.id for i in held_deletions(out, items) if i.id not in mine]
    if more:
        from memlife.quarantine import snapshot

        snapshot(store, more)
    return out


def commit_run(
    ctx: RunContext,
    executor: Executor | None,
    outcomes: Sequence[BatchOutcome],
    gate: dict[str, Any] | None,
) -> Tally:
    """Step 9: commit what the gate allowed. Staged groups first (replacement written and
    receipted, then its supersedes), then deletions; the blocked part is held back:
    supersedes stay undone (replacements never written), deletions go to quarantine (only
    the named actors' when the gate names them: held_deletions).
    Without an evaluation set (gate required) judgements in enforced namespaces wait."""
    tally = Tally()
    if executor is None or ctx.config.dry_run:
        return tally
    if completed_status(ctx.sink, ctx.prefix) is not None:
        # a rerun of a run that finished (success, blocked; one cutoff is one run): nothing
        # may follow its receipt, so what the store gained since waits for the next night.
        # (A rerun of a partial failure finishes what that one left, under a receipt of its
        # own: run_receipts.FOLLOWED.)
        tally.counts["rerun_of_completed_run"] += 1
        return tally
    gate = gate or {}
    configured = bool(gate) and gate.get("configured", True)
    held_items, held_groups, _ = ([], [], 0) if configured else ungated(ctx, outcomes)
    held_ids = {g.replacement.id for g in held_groups}
    held = {i.id for i in held_items}
    reason = "GATE_NOT_CONFIGURED"
    if configured:  # what no case of the set looks at waits too
        unseen = gate.get("uncovered") or {}
        held_ids, held, reason = (
            set(unseen.get("groups", ())),
            set(unseen.get("deletions", ())),
            "GATE_UNCOVERED",
        )
    blocking = set(gate.get("blocking_groups", ()))  # named by the gate: memoised, not re-staged
    # The memo is keyed by the set read when the run started; should the file have changed
    # before the gate read it, this verdict is another set's: remember nothing.
    same_set = gate.get("eval_digest") == executor.eval_digest
    for o in outcomes:
        for g in o.staged:
            if groups_blocked(gate) or g.replacement.id in held_ids:
                tally.counts["gate_kept_records"] += len(g.supersedes)  # they stay: retained
            if groups_blocked(gate):
                tally.counts["gate_blocked_groups"] += 1
                if g.replacement.id in blocking and same_set:
                    executor.remember_gate_blocked(g, tally)
                elif g.replacement.id in blocking:
                    tally.counts["gate_blocked_not_remembered"] += 1
            elif g.replacement.id in held_ids:
                tally.counts["gate_withheld_groups"] += 1
            else:
                executor.commit_group(g, tally)
    checkpoint("after_commit_groups")
    items = [i for o in outcomes for i in o.deletions]
    blocked = held_deletions(gate, items)
    if blocked:
        executor.quarantine(blocked, tally, "GATE_BLOCKED")
        quarantined = {i.id for i in blocked}
        items = [i for i in items if i.id not in quarantined]
    for i in items:
        if i.id in held:
            tally.ids_not_deleted.append({"id": i.id, "reason": reason})
            tally.counts["gate_withheld_deletions"] += 1
    executor.delete([i for i in items if i.id not in held], tally)
    return tally


def queue_reviews(ctx: RunContext, store: MemoryStore, outcomes: Sequence[BatchOutcome]) -> Tally:
    """Review items persist across nights: carry open ones, open new ones by priority up to
    the policy's nightly budget; the rest wait (counted; the best ``waiting_listed`` kept by
    name, ageing). A dry run only counts.
    Each batch kept only its best new items (ReviewCandidates): merged, the same ones."""
    from memlife.review_queue import ReviewCandidates, ReviewQueue

    tally = Tally()
    if ctx.config.retry_only:
        return tally
    if not ctx.config.dry_run:  # still the store's writer? A night paused past its TTL
        # reopened, for a reviewer, the items of records the erasure that took its lease over
        # had just erased and closed (audit 53l)
        from memlife.lease import fence_for

        fence_for(store)()  # the executor's fence: the lease this process holds on it
    queue = ReviewQueue.for_store(store, create=not ctx.config.dry_run)
    budget = ctx.policy.review.nightly_budget
    found = ReviewCandidates.merge([o.reviews for o in outcomes], budget, queue.backend)
    tally.counts.update(queue.queue(
        found, budget=budget, run_id=ctx.run_id, at=ctx.cutoff, dry_run=ctx.config.dry_run,
    ))  # fmt: skip
    from memlife.review_sweep import close_unfound

    items = queue.backend.list(("open", "disputed", "waiting"))  # once a night, both closings
    closed = set() if ctx.config.dry_run else close_removed(ctx, store, queue, items)
    if closed:
        tally.counts["review_items_closed"] = len(closed)
    failed = [(s["actor_id"], s["namespace"]) for o in outcomes for s in o.failed_shards]
    seen = [i for i, _ in found.carried] + [i for i, *_ in found.changed] + found.moot
    seen += found.waiting_found
    rest = [i for i in items if i.item_id not in closed]
    tally.counts.update(close_unfound(ctx, store, queue, rest, found=seen, failed_shards=failed,
                                      withheld=found.withheld))  # fmt: skip
    return tally


# what a removing operation's outcome makes of its record's open review items
_REMOVED = {"deleted": "deleted", "already_absent": "deleted", "superseded": "superseded"}


def close_removed(
    ctx: RunContext, store: MemoryStore, queue: ReviewQueue, items: Sequence[ReviewItem]
) -> set[str]:
    """Close the open items about records this run deleted or superseded: nothing is left
    to decide (open, an item waited for a reviewer for ever, and a replacement carrying the
    same finding opened its own). Closed with the operation that removed the record, as an
    erasure closes its records' items. ``items``: the open and disputed ones; the run's
    journal is read only when there are any. Returns the ids it closed."""
    from memlife.journal import OpKind, OpState, open_journal

    if not items:
        return set()
    gone = {  # (actor, namespace, record) -> (the removing operation, the item's decision)
        (o.actor_id, o.namespace, o.record_id): (o.operation_id, _REMOVED[o.outcome.value])
        for o in open_journal(store).by_run(ctx.run_id)
        if o.kind in (OpKind.delete, OpKind.supersede)
        and o.state in (OpState.APPLIED, OpState.RECEIPTED)
        and o.outcome is not None and o.outcome.value in _REMOVED
    }  # fmt: skip
    closed = set()
    for item in items:
        found = gone.get((item.actor_id, item.namespace, item.record_id))
        if found is not None and found[1] == "superseded" and item.state == "disputed":
            continue  # a merge is no person's answer: the dispute still guards it (audit 51b)
        if found is not None and queue.close(
            item.item_id, state="resolved", decision=found[1], reviewer=f"memlife:{ctx.run_id}",
            at=ctx.cutoff, operation_id=found[0],
        ):  # fmt: skip
            closed.add(item.item_id)
    return closed
