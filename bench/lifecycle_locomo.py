"""The lifecycle on memories as an agent writes them: LoCoMo through one nightly apply run.

Task (shared/data/README.md, "The lifecycle task"): every observation is a record with
actor = the conversation's sample_id, namespace = /conversations/<sample_id>/<speaker>,
semantic, agent_inferred, confidence 0.8, created at its session's date, no subject and
no owner. Evaluation cases: each QA item of categories 1-4 whose evidence an observation
carries; a case is satisfied when one of its observations is in recall's top 5, or a
record that supersedes one of them (a replacement, followed through chains).

Reports before and after one nightly apply run with the default policy (cutoff after the
last session): must-retain recall, active records, consolidated / superseded counts, review
items per reason, and the cases whose evidence was superseded without a satisfying
replacement. Targets (issue 14): review <= 10% of records, recall after >= before - 0.01,
no needed record superseded without a replacement that satisfies the case.

Offline by default (extractive consolidator). The data is read from PATH, never copied.
Recall's own access ledger goes to a separate folder so evaluating does not count as use.

    uv run python bench/lifecycle_locomo.py ../shared/data/locomo10.json [--conversations N] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

from memlife.model import MemoryRecord, Source, Status

CATEGORIES = {1, 2, 3, 4}
CUTOFF = datetime(2024, 1, 14, tzinfo=UTC)  # after the last session (2024-01-13)
K = 5


def session_time(text: str) -> datetime:
    return datetime.strptime(text, "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def load(path: Path, conversations: int | None) -> tuple[list[MemoryRecord], list[dict]]:
    records: list[MemoryRecord] = []
    cases: list[dict] = []
    for raw in json.loads(path.read_text())[:conversations]:
        sid = raw["sample_id"]
        talk = raw["conversation"]
        carriers: dict[str, list[str]] = {}
        for key, session in raw["observation"].items():
            n = key.split("_")[1]
            at = session_time(talk[f"session_{n}_date_time"])
            for speaker, items in session.items():
                for i, (text, ids) in enumerate(items):
                    rid = f"{sid}-s{n}-{speaker.lower()}-{i:03d}"
                    records.append(MemoryRecord(
                        id=rid, actor_id=sid, namespace=f"/conversations/{sid}/{speaker.lower()}",
                        memory_type="semantic", content=text, created_at=at,
                        source=Source.agent_inferred, confidence=0.8,
                    ))  # fmt: skip
                    for d in ids if isinstance(ids, list) else [ids]:
                        carriers.setdefault(d, []).append(rid)
        for q in raw["qa"]:
            if q.get("category") not in CATEGORIES:
                continue
            must = sorted({r for e in q.get("evidence", []) for r in carriers.get(e, [])})
            if must:
                cases.append({"actor": sid, "question": q["question"], "must": must,
                              "category": q["category"]})  # fmt: skip
    return records, cases


def originals(store) -> dict[str, set[str]]:
    """record id -> every original it stands for (itself, and what it supersedes, transitively)."""
    supersedes = {r.id: list(r.provenance.supersedes) for r in store.iter_all()}
    memo: dict[str, set[str]] = {}

    def expand(rid: str, seen: frozenset = frozenset()) -> set[str]:
        if rid in memo:
            return memo[rid]
        out = {rid}
        for s in supersedes.get(rid, []):
            if s not in seen:
                out |= expand(s, seen | {rid})
        memo[rid] = out
        return out

    return {rid: expand(rid) for rid in supersedes}


def evaluate(store, cases: list[dict], ledger_root: Path) -> tuple[float, list[bool]]:
    from memlife.ledger import AccessLedger
    from memlife.online.memory import LongTermMemory

    stands_for = originals(store)
    mem = LongTermMemory(store, ledger=AccessLedger(ledger_root))
    hits = []
    for c in cases:
        got = mem.recall(c["actor"], c["question"], k=K)
        covered = (
            set().union(*(stands_for.get(h.record.id, {h.record.id}) for h in got))
            if got
            else set()
        )
        hits.append(bool(covered & set(c["must"])))
    mem.close()
    return sum(hits) / max(1, len(hits)), hits


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("locomo", type=Path, help="path to locomo10.json (never copied)")
    ap.add_argument(
        "--conversations", type=int, default=None, help="only the first N conversations"
    )
    ap.add_argument(
        "--home", type=Path, default=None, help="MEMLIFE_HOME to use (default: a temp folder)"
    )
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args(argv)

    home = args.home or Path(tempfile.mkdtemp(prefix="memlife-locomo-"))
    os.environ["MEMLIFE_HOME"] = str(home)
    os.environ.pop("ANTHROPIC_API_KEY", None)  # offline: the extractive consolidator
    from memlife.pipeline import RunConfig, run_local
    from memlife.review_queue import ReviewQueue
    from memlife.stores.sqlite import SqliteStore

    records, cases = load(args.locomo, args.conversations)
    db_path = home / "memlife.db"
    store = SqliteStore(db_path)
    store.put_many(records)
    t0 = time.perf_counter()
    before, hits_before = evaluate(store, cases, home / "bench-ledger")
    t_eval = time.perf_counter() - t0
    store.close()

    t0 = time.perf_counter()
    summary = run_local(RunConfig(dry_run=False, now=CUTOFF))  # the store: $MEMLIFE_HOME/memlife.db
    t_run = time.perf_counter() - t0

    store = SqliteStore(db_path)
    after, hits_after = evaluate(store, cases, home / "bench-ledger")
    every = {r.id: r for r in store.iter_all()}
    active = sum(1 for r in every.values() if r.status is Status.active)
    items = ReviewQueue.for_store(store).list()
    per_reason = Counter(i.reason for i in items)
    reviewed_records = len({i.record_id for i in items})
    # cases that needed a superseded record and lost it (no replacement that satisfies them)
    lost = [c for c, b, a in zip(cases, hits_before, hits_after, strict=True) if b and not a]
    needs_superseded = [
        c for c, b, a in zip(cases, hits_before, hits_after, strict=True)
        if b and not a and any(every.get(m) is not None and every[m].status is Status.superseded
                               for m in c["must"])
    ]  # fmt: skip
    store.close()

    out = {
        "records": len(records), "cases": len(cases),
        "before": {"must_retain_recall": round(before, 4), "active_records": len(records)},
        "after": {"must_retain_recall": round(after, 4), "active_records": active},
        "run": {"status": summary.status, "seconds": round(t_run, 1), **summary.lifecycle,
                "other": {k: v for k, v in summary.other.items() if not k.startswith("review_reason:")}},
        "review": {"items": len(items), "records": reviewed_records,
                   "share_of_records": round(reviewed_records / max(1, len(records)), 4),
                   "per_reason": dict(per_reason)},
        "cases_lost": len(lost), "cases_lost_to_a_supersede": len(needs_superseded),
        "eval_seconds": round(t_eval, 1),
        "targets": {
            "review_le_10pct": reviewed_records <= 0.10 * len(records),
            "recall_after_ge_before_minus_0.01": after >= before - 0.01,
            "nothing_needed_superseded_without_replacement": not needs_superseded,
        },
    }  # fmt: skip
    if args.json:
        sys.stdout.write(json.dumps(out, indent=1) + "\n")
    else:
        print(f"LoCoMo lifecycle: {len(records)} records, {len(cases)} cases (top {K})")
        print(f"  must-retain recall  before {before:.3f}  after {after:.3f}")
        print(f"  active records      before {len(records)}  after {active}")
        lc = summary.lifecycle
        print(f"  run {summary.status} in {t_run:.0f}s: consolidated {lc['consolidated']}, "
              f"superseded {lc['superseded']}, deleted {lc['deleted']}, reviewed {lc['reviewed']}")  # fmt: skip
        print(f"  review items {len(items)} on {reviewed_records} records "
              f"({100 * reviewed_records / max(1, len(records)):.1f}%): {dict(per_reason)}")  # fmt: skip
        print(f"  cases lost {len(lost)} (to a supersede without a satisfying replacement: "
              f"{len(needs_superseded)})")  # fmt: skip
        print(f"  targets: {out['targets']}")
    return 0 if all(out["targets"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
