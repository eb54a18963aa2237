"""Dry-run throughput and peak memory on the embedded store, at 100k and 1M demo records.

For each size the demo data (``memlife.demo.generate``) is written into a temporary
SQLite store in chunks (not timed). The dry run itself then runs in a *fresh
subprocess* per size, so that neither generation nor a larger size's run inflates the
figure of another: peak RSS is that process's ``ru_maxrss`` (imports included; the
RSS right after imports is reported too, so the growth caused by the run is visible).
Throughput is records planned and reported per second of ``memlife.pipeline.run_local``
(start, list shards, page, expire, score, group, plan, JSONL + Parquet report), by wall
clock and by the process's CPU time (the latter is the fairer figure on a loaded machine).

Targets (foundation issue): >= 50,000 records/s and peak RSS <= 400 MB at 1M, with
RSS flat between 100k and 1M.

    uv run python bench/dry_run.py [--sizes 100000,1000000] [--json]
        [--engine local|prefect] [--consolidate] [--db-dir DIR] [--seed 7]

``--db-dir`` keeps the generated stores (keyed by size and seed) for reruns.
``--engine prefect`` runs the same dry run through the Prefect flow (temporary server;
its startup is excluded from the timing but not from the process's memory).
``--consolidate`` also runs the consolidator in the dry run (default: planning only).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ANCHOR = datetime(2026, 11, 1, tzinfo=UTC)
TARGET_RPS = 50_000
TARGET_RSS_MB = 400


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _current_rss_mb() -> float:
    try:
        import psutil

        return psutil.Process().memory_info().rss / 2**20
    except Exception:  # pragma: no cover
        return float("nan")


# -- generation (parent process, untimed) ---------------------------------------------------
def build_store(path: Path, size: int, seed: int) -> float:
    from memlife.demo import generate
    from memlife.stores.sqlite import SqliteStore

    t0 = time.perf_counter()
    store = SqliteStore(path)
    try:
        batch = []
        for r in generate(size, seed=seed, anchor=ANCHOR):
            batch.append(r)
            if len(batch) >= 10_000:
                store.put_many(batch)
                batch = []
        if batch:
            store.put_many(batch)
        store.checkpoint()
        assert store.count() == size, (store.count(), size)
    finally:
        store.close()
    return time.perf_counter() - t0


# -- measurement (fresh child process per size) ----------------------------------------------
def measure(db: Path, home: Path, engine: str, consolidate: bool) -> dict:
    os.environ["MEMLIFE_HOME"] = str(home)
    store_url = f"sqlite:///{db}"
    receipts = f"file://{home / 'receipts'}"
    from memlife.pipeline import RunConfig, run_local

    fields = set(RunConfig.model_fields)
    kw = dict(dry_run=True, now=ANCHOR, store=store_url, receipts=receipts)
    if "consolidate" in fields:
        kw["consolidate"] = consolidate
    if os.environ.get("BENCH_WORKERS") and "workers" in fields:
        kw["workers"] = int(os.environ["BENCH_WORKERS"])
    if engine == "prefect":
        from flows.nightly import nightly  # noqa: F401  (import cost outside the timing)
    rss_after_import = _current_rss_mb()
    peak_after_import = _rss_mb()
    t0, c0 = time.perf_counter(), time.process_time()
    if engine == "local":
        result = run_local(RunConfig(**kw)).as_json()
        seconds = time.perf_counter() - t0
    else:
        from flows.nightly import nightly

        result = nightly(RunConfig(**{k: v for k, v in kw.items() if k != "workers"}))
        seconds = time.perf_counter() - t0  # includes the temporary server's start
    cpu = time.process_time() - c0
    records = result["records"]
    report_rows = sum(1 for _ in open(result["report"], encoding="utf-8"))
    return {
        "records": records,
        "report_rows": report_rows,
        "seconds": round(seconds, 3),
        "records_per_s": round(records / seconds) if seconds else None,
        "cpu_seconds": round(cpu, 3),  # this process only; less sensitive to a loaded machine
        "records_per_cpu_s": round(records / cpu) if cpu else None,
        "peak_rss_mb": round(_rss_mb(), 1),
        "rss_after_import_mb": round(rss_after_import, 1),
        "peak_rss_after_import_mb": round(peak_after_import, 1),
        "children_peak_rss_mb": round(
            resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1
        ),
        "counts": result["counts"],
    }


def run_child(db: Path, home: Path, engine: str, consolidate: bool) -> dict:
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--_measure",
        str(db),
        "--_home",
        str(home),
        "--engine",
        engine,
    ] + (["--consolidate"] if consolidate else [])
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    res = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env=env)
    if res.returncode != 0:
        raise SystemExit(f"measurement failed ({res.returncode}):\n{res.stderr[-4000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="100000,1000000", help="comma-separated record counts")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--engine", choices=["local", "prefect"], default="local")
    ap.add_argument("--consolidate", action="store_true", help="also run the consolidator")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--db-dir", type=Path, default=None, help="keep/reuse generated stores here")
    ap.add_argument("--_measure", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--_home", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args._measure:
        print(json.dumps(measure(args._measure, args._home, args.engine, args.consolidate)))
        return 0

    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]
    tmp = tempfile.TemporaryDirectory(prefix="memlife-bench-")
    db_dir = args.db_dir or Path(tmp.name)
    db_dir.mkdir(parents=True, exist_ok=True)
    results = []
    try:
        for size in sizes:
            db = db_dir / f"demo-{size}-seed{args.seed}.db"
            gen_s = None
            if not db.exists():
                if not args.json:
                    print(f"generating {size:,} demo records into {db} ...", file=sys.stderr)
                gen_s = round(build_store(db, size, args.seed), 1)
            home = Path(tempfile.mkdtemp(prefix=f"run-{size}-", dir=tmp.name))
            if not args.json:
                print(f"dry run over {size:,} records ({args.engine}) ...", file=sys.stderr)
            m = run_child(db, home, args.engine, args.consolidate)
            assert m["records"] == size == m["report_rows"], (m, size)
            results.append({"size": size, "generate_s": gen_s, **m})
    finally:
        tmp.cleanup()

    big = max(results, key=lambda r: r["size"])
    small = min(results, key=lambda r: r["size"])
    verdict = {
        "rps_target": TARGET_RPS,
        "rss_target_mb": TARGET_RSS_MB,
        "rps_ok": big["records_per_s"] >= TARGET_RPS,
        "rss_ok": big["peak_rss_mb"] <= TARGET_RSS_MB,
        # flat: growth from the smallest to the largest size within 15% (or 30 MB)
        "rss_growth_mb": round(big["peak_rss_mb"] - small["peak_rss_mb"], 1),
        "rss_flat": big["peak_rss_mb"] - small["peak_rss_mb"]
        <= max(30.0, 0.15 * small["peak_rss_mb"]),
    }
    out = {
        "engine": args.engine,
        "consolidate": args.consolidate,
        "cpus": os.cpu_count(),
        "load_avg_at_end": [round(x, 2) for x in os.getloadavg()],
        "results": results,
        "verdict": verdict,
    }
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        print(
            f"{'records':>10} {'seconds':>8} {'records/s':>10} {'records/cpu-s':>14} "
            f"{'peak RSS MB':>12} {'RSS after import':>17}"
        )
        for r in results:
            print(
                f"{r['size']:>10,} {r['seconds']:>8.2f} {r['records_per_s']:>10,} "
                f"{r['records_per_cpu_s']:>14,} {r['peak_rss_mb']:>12.1f} "
                f"{r['rss_after_import_mb']:>17.1f}"
            )
        print(
            f"targets: >= {TARGET_RPS:,} records/s -> {'ok' if verdict['rps_ok'] else 'MISSED'}; "
            f"peak RSS <= {TARGET_RSS_MB} MB -> {'ok' if verdict['rss_ok'] else 'MISSED'}; "
            f"RSS growth {verdict['rss_growth_mb']} MB -> {'flat' if verdict['rss_flat'] else 'NOT flat'}"
            f"  (load avg {out['load_avg_at_end']})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
