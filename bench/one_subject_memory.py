"""Bounded memory for one large group: one actor, N records on ONE subject, a dry run.

Before issue 14, grouping built N x N similarity matrices for such an actor (50k records:
7.4 GB, then a segfault). The group's decision (memlife.group_plan) now reads its records a
chunk at a time, keeps no content, embeds one record per distinct statement and clusters
statements against at most 4,096 leaders: near-linear time, no N x N. This writes N records
(one actor, one namespace, one subject, a few hundred distinct sentences repeated with
small variations), runs the default dry run (consolidation included, extractive: no model
call) in a child process and reports its peak RSS and time, three times, each in a fresh
process: "first" (nothing cached: the graph-optimised copy of the embedding model is
derived once, in its own short child process, whose peak is reported apart), "cold" (a
first night on a machine that has it: the embedding cache is empty, the ONNX session is
loaded) and "warm" (a later night: every vector cached, no model loaded). The model cache
is a temporary folder of the benchmark's own. Target: <= 400 MB at N = 50,000.

    uv run python bench/one_subject_memory.py [--records 50000] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

DRINKS = ["black coffee", "green tea", "oat milk latte", "espresso", "chai", "mint tea",
          "flat white", "hot chocolate", "matcha", "iced coffee"]  # fmt: skip
TIMES = ["every morning", "after lunch", "on weekends", "before meetings", "at night"]


def write(db: Path, n: int) -> None:
    from memlife.model import MemoryRecord, Source
    from memlife.stores.sqlite import SqliteStore

    t0 = datetime(2025, 1, 1, tzinfo=UTC)
    store = SqliteStore(db)
    batch = []
    for i in range(n):
        text = f"Drinks {DRINKS[i % 10]} {TIMES[(i // 10) % 5]}, cup {i % 7}."
        batch.append(MemoryRecord(
            id=f"m-{i:06d}", actor_id="u-big", namespace="/users/u-big/preferences",
            memory_type="semantic", subject="beverage", content=text, owner="u-big",
            source=Source.user_stated, created_at=t0 + timedelta(minutes=i),
        ))  # fmt: skip
        if len(batch) == 1000:
            store.put_many(batch)
            batch = []
    if batch:
        store.put_many(batch)
    store.close()


def child(home: str) -> None:
    os.environ["MEMLIFE_HOME"] = home
    from memlife.pipeline import RunConfig, run_local

    t0 = time.perf_counter()
    s = run_local(RunConfig(dry_run=True, now=datetime(2026, 1, 1, tzinfo=UTC), workers=1))
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    helper_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # model derivation
    print(json.dumps({"status": s.status, "records": s.records, "seconds": round(time.perf_counter() - t0, 1),
                      "peak_rss_mb": round(peak_mb, 1), "helper_peak_rss_mb": round(helper_mb, 1),
                      "other": s.other}))  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--records", type=int, default=50_000)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child)
        return 0
    home = Path(tempfile.mkdtemp(prefix="memlife-onesubject-"))
    runs = {}
    try:
        write(home / "memlife.db", args.records)
        env = {**os.environ, "MEMLIFE_MODEL_CACHE": str(home.with_name(home.name + "-models"))}
        for night in ("first", "cold", "warm"):
            if night == "cold":  # the vectors the first night cached are forgotten
                (home / "embeddings.db").unlink()
            out = subprocess.run(
                [sys.executable, __file__, "--child", str(home)],
                capture_output=True,
                text=True,
                env=env,
            )
            if out.returncode:
                sys.stderr.write(out.stderr)
                return out.returncode
            runs[night] = json.loads(out.stdout.strip().splitlines()[-1])
    finally:  # a 50k-record store per run: never left behind in /tmp
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(home.with_name(home.name + "-models"), ignore_errors=True)
    result = {"records": args.records, **runs,
              "target_rss_le_400mb": {k: v["peak_rss_mb"] <= 400 for k, v in runs.items()}}  # fmt: skip
    print(json.dumps(result, indent=1) if args.json else "\n".join(
          f"{args.records} records on one subject, {k} night: dry run {v['seconds']} s, "
          f"peak RSS {v['peak_rss_mb']} MB ({v['status']})"
          + (f"; model derivation child {v['helper_peak_rss_mb']} MB" if v["helper_peak_rss_mb"] else "")
          for k, v in runs.items()))  # fmt: skip
    return 0 if all(result["target_rss_le_400mb"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
