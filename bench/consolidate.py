"""Consolidation stage costs: embedding throughput, grouping time, model calls per 1,000 records.

- embeddings/s: MiniLM int8 on distinct demo texts (canary markers make every text unique),
  in the embedder's batches;
- grouping: N demo records -> subject groups (memlife.group.build_groups) and, per group,
  statement clusters with survivor/duplicate/contradicted roles (analyse_group). Vectors
  come from the embedding cache: demo contents repeat, so only distinct texts are embedded
  (timed apart), and a second pass over all N records is served from the cache;
- model calls: the planner (memlife.plan.Planner over memlife.model.plan_view) per actor +
  namespace, then groups of consolidate/supersede candidates only: at most one call per
  group (split at max_group_size); none for expired, held, retained or reviewed records.

    uv run python bench/consolidate.py [--records 100000] [--embed-texts 2000] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter, defaultdict
from datetime import UTC, datetime

from memlife.demo import generate
from memlife.embed import default_embedder
from memlife.embed_cache import EmbeddingCache
from memlife.group import analyse_group, build_groups
from memlife.model import plan_view
from memlife.plan import Action, Planner
from memlife.policy import load_policy

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

    # 2. grouping at N records
    t = time.perf_counter()
    records = list(generate(args.records, anchor=ANCHOR))
    gen_s = time.perf_counter() - t
    cache = EmbeddingCache(emb, path=":memory:")
    t = time.perf_counter()
    cache.get_or_embed(records)
    first_s = time.perf_counter() - t
    t = time.perf_counter()
    vectors = cache.get_or_embed(records)  # all hits
    second_s = time.perf_counter() - t
    row_of = {r.id: i for i, r in enumerate(records)}
    t = time.perf_counter()
    groups = build_groups(records, policy=policy)
    roles: Counter[str] = Counter()
    for g in groups:
        a = analyse_group(
            g,
            vectors[[row_of[i] for i in g.ids]],
            grouping=policy.grouping,
            weights=policy.source_weights,
        )
        roles.update(
            duplicate=len(a.duplicates),
            contradicted=len(a.contradicted),
            conflicting=len(a.conflicting),
            survivor=1,
        )
    group_s = time.perf_counter() - t
    out["grouping"] = {
        "generate_seconds": round(gen_s, 2),
        "distinct_texts_embedded": cache.stats.misses,
        "embed_distinct_seconds": round(first_s, 2),
        "cached_lookup_seconds": round(second_s, 2),
        "groups": len(groups),
        "records_in_groups": sum(len(g.records) for g in groups),
        "seconds": round(group_s, 2),
        "records_per_second": round(args.records / group_s, 0),
        "roles": dict(roles),
    }

    # 3. model calls per 1,000 records, with the planner
    t = time.perf_counter()
    shards: dict[tuple[str, str], list] = defaultdict(list)
    for r in records:
        shards[(r.actor_id, r.namespace)].append(plan_view(r))
    planner = Planner(policy, ANCHOR)
    decisions = [d for views in shards.values() for d in planner.plan_shard([views])]
    actions = Counter(d.action.value for d in decisions)
    call_groups = build_groups(records, policy=policy, decisions=decisions)
    plan_s = time.perf_counter() - t
    skipped = sum(
        actions[a.value]
        for a in (Action.delete_expired, Action.delete_pending, Action.hold, Action.retain)
    )
    out["model_calls"] = {
        "calls": len(call_groups),
        "per_1000_records": round(1000 * len(call_groups) / max(1, args.records), 1),
        "records_in_calls": sum(len(g.records) for g in call_groups),
        "records_never_sent": skipped,
        "largest_group": max((len(g.records) for g in call_groups), default=0),
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
        f"grouping {args.records:,} records: {g['seconds']} s ({g['groups']:,} groups, "
        f"{g['records_in_groups']:,} records in groups); distinct texts {g['distinct_texts_embedded']:,} "
        f"embedded in {g['embed_distinct_seconds']} s, all-hit cache pass {g['cached_lookup_seconds']} s"
    )
    print(f"roles: {g['roles']}")
    print(
        f"model calls: {m['calls']:,} ({m['per_1000_records']} per 1,000 records; "
        f"{m['records_in_calls']:,} records sent, {m['records_never_sent']:,} expired/held/retained never sent; "
        f"largest group {m['largest_group']})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
