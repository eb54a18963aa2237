"""Consolidation stage costs: embedding throughput, grouping time, model calls per 1,000 records.

- embeddings/s: MiniLM int8 on distinct demo texts (canary markers make every text unique),
  in the embedder's batches;
- grouping, the production path: N demo records in a SQLite store; per actor + namespace
  the planner (memlife.plan.Planner over the store's page_views), then the group executor's
  staging (memlife.apply.groups.stage_shard: read_members -> group_plan.plan_group ->
  the extractive consolidator) in a dry run. Vectors come from the embedding cache: demo
  contents repeat, so only distinct texts are embedded (timed apart);
- model calls: one per staged group (the model sees at most max_group_size records; older
  ones are superseded by rule); none for expired, held, retained or reviewed records.

    uv run python bench/consolidate.py [--records 100000] [--embed-texts 2000] [--json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

from memlife.apply import Executor, Tally
from memlife.consolidate.extractive import ExtractiveConsolidator
from memlife.demo import generate
from memlife.embed import default_embedder
from memlife.embed_cache import EmbeddingCache
from memlife.plan import Action, Planner
from memlife.policy import load_policy
from memlife.stores.sqlite import SqliteStore

ANCHOR = datetime(2026, 6, 1, tzinfo=UTC)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--embed-texts", type=int, default=2000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    policy = load_policy()
    emb = default_embedder()
    out: dict[str, object] = {"records": args.records, "model_id": emb.model_id}

    # 1. embedding throughput on distinct texts
    texts = [r.content for r in generate(args.embed_texts, anchor=ANCHOR, markers=True)]
    emb.embed(texts[:64])  # warm-up: session and thread pool
    t = time.perf_counter()
    emb.embed(texts)
    dt = time.perf_counter() - t
    out["embed"] = {
        "texts": len(texts),
        "batch": emb.batch_size,
        "threads": emb.intra_op_threads,
        "seconds": round(dt, 3),
        "per_second": round(len(texts) / dt, 1),
    }

    # 2. the nightly path at N records: the planner per actor + namespace, then the group
    # executor's staging (apply/groups.stage_shard -> group_plan.plan_group) in a dry run,
    # against a real SQLite store: what `memlife run` does, minus the gate and the report
    t = time.perf_counter()
    records = list(generate(args.records, anchor=ANCHOR))
    gen_s = time.perf_counter() - t
    tmp = Path(tempfile.mkdtemp(prefix="memlife-bench-consolidate-"))
    store = SqliteStore(tmp / "store.db")
    store.put_many(records)
    cache = EmbeddingCache(emb, path=":memory:")
    t = time.perf_counter()
    cache.get_or_embed(records)  # distinct texts embedded once (timed apart)
    first_s = time.perf_counter() - t
    executor = Executor(
        run_id="bench", run_key="bench", policy=policy, cutoff=ANCHOR, store=store,
        journal=None, sink=None, consolidator=ExtractiveConsolidator(policy=policy),
        dry_run=True, embeddings=cache,
    )  # type: ignore[arg-type]  # fmt: skip
    planner = Planner(policy, ANCHOR)
    tally = Tally()
    actions: Counter[str] = Counter()
    staged = []
    plan_s = stage_s = 0.0
    for actor in store.list_actors():
        for ns in store.list_namespaces(actor):
            t = time.perf_counter()
            pages, token = [], None
            while True:
                views, token = store.page_views(actor, ns, page_size=500, token=token)
                pages.append(views)
                if token is None:
                    break
            decisions = planner.plan_shard(pages)
            actions.update(d.action.value for d in decisions)
            t2 = time.perf_counter()
            staged += executor.stage_shard(decisions, tally)
            plan_s += t2 - t
            stage_s += time.perf_counter() - t2
    store.close()
    shutil.rmtree(tmp, ignore_errors=True)
    c = tally.counts
    out["grouping"] = {
        "generate_seconds": round(gen_s, 2),
        "distinct_texts_embedded": cache.stats.misses,
        "embed_distinct_seconds": round(first_s, 2),
        "plan_seconds": round(plan_s, 2),
        "seconds": round(stage_s, 2),  # reading, grouping, survivor/roles, consolidator
        "records_per_second": round(args.records / max(stage_s, 1e-9), 0),
        "groups": len(staged),
        "records_in_groups": sum(len(g.supersedes) for g in staged),
        "roles": {
            "duplicate": c["merged_duplicates"],
            "contradicted": c["contradictions_resolved"],
            "over_cap_by_rule": c["over_cap_superseded_by_rule"],
            "conflicting_left_for_review": c["conflicting_left_for_review"],
        },  # fmt: skip
    }

    # 3. model calls per 1,000 records: one per staged group (the model sees <= the cap)
    skipped = sum(
        actions[a.value]
        for a in (Action.delete_expired, Action.delete_pending, Action.hold, Action.retain)
    )
    out["model_calls"] = {
        "calls": len(staged),
        "per_1000_records": round(1000 * len(staged) / max(1, args.records), 1),
        "records_superseded_by_calls": sum(len(g.supersedes) for g in staged),
        "records_never_sent": skipped,
        "largest_group": max((len(g.supersedes) for g in staged), default=0),
        "actions": dict(actions),
        "plan_seconds": round(plan_s, 2),
    }

    if args.json:
        json.dump(out, sys.stdout, indent=2)
        print()
        return 0
    e, g, m = out["embed"], out["grouping"], out["model_calls"]  # type: ignore[assignment]
    print(
        f"embeddings: {e['per_second']}/s ({e['texts']} texts, batch {e['batch']}, "
        f"{e['threads']} threads, {emb.model_id})"
    )
    print(
        f"staging {args.records:,} records (nightly path): {g['seconds']} s ({g['groups']:,} groups, "
        f"{g['records_in_groups']:,} records in groups; planning {g['plan_seconds']} s); distinct "
        f"texts {g['distinct_texts_embedded']:,} embedded in {g['embed_distinct_seconds']} s"
    )
    print(f"roles: {g['roles']}")
    print(
        f"model calls: {m['calls']:,} ({m['per_1000_records']} per 1,000 records; "
        f"{m['records_superseded_by_calls']:,} records superseded by them, {m['records_never_sent']:,} expired/held/retained never sent; "
        f"largest group {m['largest_group']})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
