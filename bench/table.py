"""One table of the default path at scale: what users run, against its targets (issue 16).

Every measure runs the production code path with default settings in a *fresh child
process*, while the parent samples the RSS of that process and all its children
(psutil) every 20 ms: "peak RSS" is the peak of that sum. A raw baseline is measured in
the same run: a plain ``sqlite3`` ordered scan of the same store file, all columns.

Measures
- raw scan: ``SELECT * FROM records ORDER BY actor_id, namespace, id`` (Python sqlite3),
  the median of three runs
- default dry run: ``memlife run --dry-run`` as the CLI runs it with no flags (engine
  local when no Prefect API is configured; consolidation/group analysis on), warm caches
  (a first dry run warms the embedding cache and the derived results, memlife/derived.py;
  three more on the unchanged store are timed, and the median is given)
- second-night apply: apply once (first night), then apply again on the unchanged store
  in a new process (a scheduler starts each night afresh) and time that; model calls,
  texts embedded and store writes are counted (target 0)
- first-night embedding throughput: distinct demo texts through the default embedder (median
  of three passes; it keeps no cache)
- JSONL import: ``memlife.importer.import_file`` of N demo records, with peak RSS; then the
  same lines shuffled (ids in random order, as a store's export of uuids holds them)
- recall p95 at 100k (``bench/recall_latency.py``'s path), ``--recall`` to include it
- grouping, one actor with 25k and 50k records on one subject (``bench/one_subject_memory.py``,
  three nights each in a fresh process): peak RSS and how time grows, ``--grouping``
- Prefect flow overhead on a running server (``--prefect``): 13 records, flow minus local

    uv run python bench/table.py [--records 20000] [--recall] [--json out.json]
    # README's table: 100k with every measure, then 1M without the apply nights
    uv run python bench/table.py --records 100000 --prefect --recall --grouping \
        --db-dir /tmp/memlife-bench
    uv run python bench/table.py --records 1000000 --skip-apply --db-dir /tmp/memlife-bench
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ANCHOR = datetime(2026, 11, 1, tzinfo=UTC)
NOW = "2026-11-01T00:00:00+00:00"
NEXT_NIGHT = "2026-11-02T00:00:00+00:00"  # the second night: the scheduler's next cutoff


# -- parent: run a child, sample RSS over the process tree --------------------------------
WARM_RUNS = 3  # runs of the raw scan and the warm dry run; the table gives the median


def median_run(kind: str, *args: str) -> dict:
    """The run of median time among WARM_RUNS children (one run on this shared VM can take
    1.6x another), with every run's seconds beside it."""
    runs = sorted((run_child(kind, *args) for _ in range(WARM_RUNS)), key=lambda r: r["seconds"])
    return {**runs[len(runs) // 2], "all_seconds": [r["seconds"] for r in runs]}


def run_child(kind: str, *args: str, env_extra: dict | None = None) -> dict:
    import psutil

    cmd = [sys.executable, str(Path(__file__).resolve()), "--_child", kind, *args]
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.update(env_extra or {})
    proc = psutil.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    peak = 0
    per_pid: dict[int, int] = {}  # each process's own peak (the measured child is proc)
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not stop.is_set():
            try:
                procs = [proc, *proc.children(recursive=True)]
                total = 0
                for p in procs:
                    try:
                        rss = p.memory_info().rss
                    except psutil.Error:
                        continue
                    total += rss
                    per_pid[p.pid] = max(per_pid.get(p.pid, 0), rss)
                peak = max(peak, total)
            except psutil.Error:
                pass
            stop.wait(0.02)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    out, err = proc.communicate()
    stop.set()
    t.join()
    if proc.returncode != 0:
        raise SystemExit(f"{kind} failed ({proc.returncode}):\n{err.decode()[-4000:]}")
    res = json.loads(out.decode().strip().splitlines()[-1])
    res["peak_rss_mb"] = round(peak / 2**20, 1)
    res["peak_rss_main_mb"] = round(per_pid.get(proc.pid, 0) / 2**20, 1)
    res["peak_rss_others_mb"] = sorted(
        (round(v / 2**20, 1) for k, v in per_pid.items() if k != proc.pid), reverse=True
    )  # planning children (and multiprocessing's resource tracker), each its own peak
    res["load_avg"] = [round(x, 2) for x in os.getloadavg()]
    return res


def per_process(res: dict) -> str:
    """' (main 250, others 138 / 12)': each process's own peak, when there were several."""
    others = res.get("peak_rss_others_mb") or []
    if not others:
        return ""
    rest = " / ".join(f"{v:.0f}" for v in others)
    return f" (main {res['peak_rss_main_mb']:.0f}, others {rest})"


# -- children ----------------------------------------------------------------------------
def build_store(db: Path, n: int) -> None:
    from memlife.demo import generate
    from memlife.stores.sqlite import SqliteStore

    store = SqliteStore(db)
    try:
        batch = []
        for r in generate(n, seed=7, anchor=ANCHOR):
            batch.append(r)
            if len(batch) >= 10_000:
                store.put_many(batch)
                batch = []
        if batch:
            store.put_many(batch)
        store.checkpoint()
    finally:
        store.close()


def raw_scan(db: Path) -> dict:
    t0 = time.perf_counter()
    con = sqlite3.connect(db)
    n = 0
    for _row in con.execute("SELECT * FROM records ORDER BY actor_id, namespace, id"):
        n += 1
    con.close()
    s = time.perf_counter() - t0
    return {"records": n, "seconds": round(s, 3), "per_s": round(n / s)}


class Counters:
    """Counts model calls, texts embedded and store writes, by wrapping the real classes."""

    def __init__(self) -> None:
        self.model_calls = 0
        self.embedded = 0
        self.writes = 0
        from memlife.consolidate.anthropic import AnthropicConsolidator
        from memlife.consolidate.extractive import ExtractiveConsolidator
        from memlife.embed import MiniLMEmbedder
        from memlife.stores.sqlite import SqliteStore

        for cls in (AnthropicConsolidator, ExtractiveConsolidator):
            self._wrap(cls, "consolidate", lambda a, kw: 1, "model_calls")
        self._wrap(MiniLMEmbedder, "embed", lambda a, kw: len(a[0]), "embedded")
        # a night embeds through the cache (EmbeddingCache._embed_fresh): counted too
        self._wrap(MiniLMEmbedder, "embed_with_tokens", lambda a, kw: len(a[0]), "embedded")
        for name in (
            "put_many",
            "set_status",
            "delete_many",
            "add_tombstones",
            "put_replacement",
            "insert_new",
        ):
            self._wrap(
                SqliteStore,
                name,
                lambda a, kw: len(a[0]) if a and hasattr(a[0], "__len__") else 1,
                "writes",
            )

    def _wrap(self, cls: type, name: str, size, counter: str) -> None:
        orig = getattr(cls, name)

        def wrapper(obj, *a, **kw):
            n = size(a, kw)
            if n:
                setattr(self, counter, getattr(self, counter) + n)
            return orig(obj, *a, **kw)

        setattr(cls, name, wrapper)


def records_digest(db: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    con = sqlite3.connect(db)
    for row in con.execute("SELECT * FROM records ORDER BY id"):
        h.update(repr(row).encode())
    con.close()
    return h.hexdigest()


def _cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def run_default(db: Path, home: Path, dry_run: bool, now: str = NOW) -> dict:
    """The pipeline as `memlife run` calls it with no flags but --dry-run / apply."""
    from memlife.pipeline import RunConfig, run_local

    cfg = RunConfig(
        dry_run=dry_run,
        now=datetime.fromisoformat(now),
        store=f"sqlite:///{db}",
        receipts=f"file://{home / 'receipts'}",
    )
    t0, c0 = time.perf_counter(), _cpu()
    result = run_local(cfg).as_json()
    return {
        "seconds": time.perf_counter() - t0,
        "cpu_s": round(_cpu() - c0, 2),  # user+sys of this process and its planning children
        "records": result["records"],
        "status": result.get("status"),
    }


def child(kind: str, args: list[str]) -> dict:
    if kind == "build":
        build_store(Path(args[0]), int(args[1]))
        return {}
    if kind == "raw":
        return raw_scan(Path(args[0]))
    db, home = Path(args[0]), Path(args[1]) if len(args) > 1 else None
    if home is not None:
        os.environ["MEMLIFE_HOME"] = str(home)
    if kind in ("dry", "dry_cold"):  # cold: the first night fills the embedding cache
        return run_default(db, home, dry_run=True)
    if kind == "apply1":  # the first night, in its own process
        return run_default(db, home, dry_run=False)
    if kind == "apply2":  # the next night: a new process, as a scheduler starts one
        before = records_digest(db)
        c = Counters()
        r = run_default(db, home, dry_run=False, now=NEXT_NIGHT)
        r.update(
            model_calls=c.model_calls,
            embedded=c.embedded,
            writes=c.writes,
            records_changed=records_digest(db) != before,
        )
        return r
    if kind == "embed":
        from memlife.demo import generate
        from memlife.embed import default_embedder

        texts = list(
            dict.fromkeys(r.content for r in generate(int(args[1]) * 4, seed=11, anchor=ANCHOR))
        )
        texts = texts[: int(args[1])]
        emb = default_embedder()
        emb.embed(texts[:8])  # session warm-up
        runs = []  # the median of three, as the raw scan's and the dry run's (no cache here)
        for _ in range(3):
            t0 = time.perf_counter()
            emb.embed(texts)
            runs.append(time.perf_counter() - t0)
        s = statistics.median(runs)
        return {
            "texts": len(texts),
            "seconds": round(s, 3),
            "per_s": round(len(texts) / s),
            "runs_per_s": [round(len(texts) / r) for r in runs],
            "threads": emb.intra_op_threads,
        }
    if kind == "import":
        from memlife.importer import import_file
        from memlife.stores.sqlite import SqliteStore

        store = SqliteStore(db)
        t0 = time.perf_counter()
        src = home / (args[2] if len(args) > 2 else "records.jsonl")
        rep = import_file(store, src, now=datetime.fromisoformat(NOW))
        s = time.perf_counter() - t0
        store.close()
        return {
            "records": rep.imported,
            "invalid": len(rep.invalid),
            "seconds": round(s, 3),
            "per_s": round(rep.imported / s),
        }
    if kind == "prefect":  # PREFECT_API_URL points at a running server (prefect_server())
        return prefect_overhead(db, home)
    raise SystemExit(f"unknown child {kind}")


def prefect_overhead(db: Path, home: Path) -> dict:
    """13 demo records: the local engine, then the nightly flow on the running server, twice
    each (the first flow run in a process also connects the client); dry runs."""
    from memlife.stores.sqlite import SqliteStore

    store = SqliteStore(db)
    from memlife.demo import generate

    store.put_many(list(generate(13, seed=7, anchor=ANCHOR)))
    store.close()
    from flows.nightly import nightly  # imported before timing: the import is not overhead
    from memlife.pipeline import RunConfig

    def timed(fn) -> float:
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0

    cfg = RunConfig(dry_run=True, now=datetime.fromisoformat(NOW), store=f"sqlite:///{db}",
                    receipts=f"file://{home / 'receipts'}")  # fmt: skip
    from memlife.pipeline import run_local

    local = [timed(lambda: run_local(cfg)) for _ in range(2)]
    flow = [timed(lambda: nightly(config=cfg)) for _ in range(2)]
    return {"local_s": [round(x, 2) for x in local], "flow_s": [round(x, 2) for x in flow],
            "overhead_first_s": round(flow[0] - local[1], 2),
            "overhead_s": round(flow[1] - local[1], 2)}  # fmt: skip


def prefect_server(tmp: Path) -> tuple[subprocess.Popen, dict]:
    """``prefect server start`` on 127.0.0.1 with its own home and database; the env a
    client needs to use it. Stopped by pid (its process group) by the caller."""
    import socket

    import httpx

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    home = tmp / "prefect-home"
    env = {
        "PREFECT_HOME": str(home),
        "PREFECT_LOCAL_STORAGE_PATH": str(home / "storage"),
        "PREFECT_API_URL": f"http://127.0.0.1:{port}/api",
        "PREFECT_API_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{home / 'server.db'}",
        "DO_NOT_TRACK": "1",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_LOGGING_LEVEL": "WARNING",
        "PREFECT_SERVER_UI_ENABLED": "false",
    }
    full = {**os.environ, **env}
    full.pop("PREFECT_PROFILES_PATH", None)
    log = (tmp / "prefect-server.log").open("w")
    prefect = str(Path(sys.executable).parent / "prefect")
    server = subprocess.Popen([prefect, "server", "start", "--host", "127.0.0.1", "--port",
                               str(port)], cwd=tmp, env=full, stdout=log,
                              stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            if httpx.get(env["PREFECT_API_URL"] + "/health", timeout=2).status_code == 200:
                return server, env
        except httpx.HTTPError:
            pass
        if server.poll() is not None:
            break
        time.sleep(1)
    stop_server(server)
    raise SystemExit(f"prefect server did not start; see {tmp / 'prefect-server.log'}")


def stop_server(server: subprocess.Popen) -> None:
    import signal

    for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
        try:
            os.killpg(server.pid, sig)
            server.wait(wait)
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue


def write_jsonl(path: Path, n: int) -> None:
    from memlife.demo import generate

    with path.open("w", encoding="utf-8") as f:
        for r in generate(n, seed=7, anchor=ANCHOR):
            f.write(r.to_json() + "\n")


# -- the table -------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=20_000, help="demo records (1000000: full)")
    ap.add_argument("--embed-texts", type=int, default=1000)
    ap.add_argument("--recall", action="store_true", help="also recall p95 at 100k (slow)")
    ap.add_argument(
        "--grouping",
        action="store_true",
        help="also one actor with 25k and 50k records on one subject (~1 min)",
    )
    ap.add_argument("--json", type=Path, default=None, help="write the results here")
    ap.add_argument(
        "--db-dir",
        type=Path,
        default=None,
        help="keep the demo store, JSONL and warm embedding cache here (DIR/n<records>) and "
        "reuse them next time: the first night is then not re-measured",
    )
    ap.add_argument(
        "--prefect", action="store_true", help="also a flow run on a running Prefect server"
    )
    ap.add_argument("--skip-apply", action="store_true", help="leave out the two apply nights")
    ap.add_argument("--_child", help=argparse.SUPPRESS)
    args, rest = ap.parse_known_args(argv)
    if args._child:
        print(json.dumps(child(args._child, rest)))
        return 0

    n = args.records
    keep = args.db_dir is not None  # reuse the store, JSONL and warm cache across invocations
    tmp = args.db_dir / f"n{n}" if keep else Path(tempfile.mkdtemp(prefix="memlife-table-"))
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        db = tmp / "store.db"
        res: dict = {"records": n, "cpus": os.cpu_count(), "started": time.strftime("%FT%TZ")}
        res["cpu_probe_s"] = [cpu_probe()]
        res["bytecode_missing"] = bytecode_missing()
        if not (db.exists() and (tmp / "built").exists()):
            print(f"generating {n:,} demo records ...", file=sys.stderr)
            db.unlink(missing_ok=True)
            run_child("build", str(db), str(n))
            (tmp / "built").touch()
        print("raw scan ...", file=sys.stderr)
        res["raw_scan"] = median_run("raw", str(db))
        raw_s = res["raw_scan"]["seconds"]
        dry_home = tmp / "dry"
        if (dry_home / "embeddings.db").exists() and (tmp / "warm").exists():
            print("first night: embedding cache reused from an earlier run", file=sys.stderr)
            res["dry_cold"] = None
        else:
            print("default dry run, first night (cold embedding cache) ...", file=sys.stderr)
            shutil.rmtree(dry_home, ignore_errors=True)
            res["dry_cold"] = run_child("dry_cold", str(db), str(dry_home))
            (tmp / "warm").touch()
        res["dry_fill"] = None
        if not has_derived(dry_home / "embeddings.db"):
            # a cache warmed before the derived results were kept (memlife/derived.py): one
            # night with the embeddings warm fills them, as the first night does otherwise
            print("default dry run, derived results cold (embeddings warm) ...", file=sys.stderr)
            res["dry_fill"] = run_child("dry", str(db), str(dry_home))
        print(f"default dry run, warm caches, {WARM_RUNS} times ...", file=sys.stderr)
        res["dry_run"] = median_run("dry", str(db), str(dry_home))  # the second night's yardstick
        shutil.rmtree(dry_home / "reports", ignore_errors=True)  # reports of reruns pile up
        if args.skip_apply:
            res["apply2"] = None
        else:
            print("apply, twice (second night timed) ...", file=sys.stderr)
            adb = tmp / "apply.db"
            shutil.copy(db, adb)
            shutil.rmtree(tmp / "apply", ignore_errors=True)
            shutil.copytree(
                dry_home,
                tmp / "apply",
                ignore=shutil.ignore_patterns("receipts*", "reports*", "runs*"),
            )  # reuses the warm embedding cache
            first = run_child("apply1", str(adb), str(tmp / "apply"))
            res["apply2"] = run_child("apply2", str(adb), str(tmp / "apply"))
            res["apply2"]["first_apply_seconds"] = round(first["seconds"], 3)
            adb.unlink()
            shutil.rmtree(tmp / "apply", ignore_errors=True)
        print("embedding throughput ...", file=sys.stderr)
        res["embed"] = run_child("embed", str(db), str(args.embed_texts))
        print("JSONL import ...", file=sys.stderr)
        (tmp / "imp").mkdir(exist_ok=True)
        if not (tmp / "imp" / "written").exists():
            write_jsonl(tmp / "imp" / "records.jsonl", n)
            (tmp / "imp" / "written").touch()
        for f in (tmp / "imp").glob("new.db*"):
            f.unlink()
        res["import"] = run_child("import", str(tmp / "imp" / "new.db"), str(tmp / "imp"))
        print("JSONL import, the same lines in random id order ...", file=sys.stderr)
        from import_rate import shuffled  # bench/import_rate.py (this script's folder)

        for f in (tmp / "imp").glob("new.db*"):
            f.unlink()
        name = shuffled(tmp / "imp" / "records.jsonl").name
        res["import_shuffled"] = run_child(
            "import", str(tmp / "imp" / "new.db"), str(tmp / "imp"), name
        )
        if args.prefect:
            print("Prefect flow on a running server (starting it) ...", file=sys.stderr)
            (tmp / "pf").mkdir(exist_ok=True)
            for f in (tmp / "pf").glob("store.db*"):
                f.unlink()
            server, penv = prefect_server(tmp / "pf")
            try:
                res["prefect"] = run_child(
                    "prefect", str(tmp / "pf" / "store.db"), str(tmp / "pf"), env_extra=penv
                )
            finally:
                stop_server(server)
        if args.grouping:
            print("grouping, one actor on one subject, 25k and 50k records ...", file=sys.stderr)
            res["grouping"] = {str(k): one_subject(k) for k in GROUPING_SIZES}
        if args.recall:
            print("recall p95 at 100k ...", file=sys.stderr)
            out = subprocess.run(
                [
                    sys.executable,
                    str(REPO / "bench" / "recall_latency.py"),
                    "--sizes",
                    "100000",
                    "--queries",
                    "100",
                    "--json",
                ],
                cwd=REPO,
                capture_output=True,
                text=True,
                check=True,
            )
            res["recall"] = json.loads(out.stdout)["results"][0]
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)
    res["load_avg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    res["cpu_probe_s"].append(cpu_probe())
    rows = table_rows(res, raw_s)
    print(render(rows, res))
    res["table"] = rows
    if args.json:
        args.json.write_text(json.dumps(res, indent=1))
    return 0


def has_derived(path: Path) -> bool:
    """True when the dry run's cache file already keeps derived results (a later night)."""
    if not path.exists():
        return False
    con = sqlite3.connect(path)
    try:
        q = "SELECT 1 FROM sqlite_master WHERE type='table' AND name='derived'"
        return con.execute(q).fetchone() is not None and bool(
            con.execute("SELECT 1 FROM derived LIMIT 1").fetchone()
        )
    finally:
        con.close()


def table_rows(res: dict, raw_s: float) -> list[dict]:
    n = res["records"]
    d, a, e, i = res["dry_run"], res["apply2"], res["embed"], res["import"]
    rows = [
        (
            f"raw scan (sqlite3, all columns, ordered, median of {WARM_RUNS})",
            f"{res['raw_scan']['per_s']:,} rec/s",
            "baseline",
            1.0,
        ),
        (
            f"default dry run, {n:,} records, warm caches (median of {WARM_RUNS})",
            f"{n / d['seconds']:,.0f} rec/s ({d['cpu_s']:.0f} s CPU, all processes)",
            ">= 50k rec/s; <= 5x raw",
            d["seconds"] / raw_s,
        ),
        (
            "  peak RSS, all processes",
            f"{d['peak_rss_mb']:.0f} MB{per_process(d)}",
            "<= 400 MB",
            None,
        ),
    ]
    f = res.get("dry_fill")
    if f:
        rows.append(
            (
                "  derived results cold (embeddings warm)",
                f"{n / f['seconds']:,.0f} rec/s ({f['cpu_s']:.0f} s CPU); "
                f"peak RSS {f['peak_rss_mb']:.0f} MB",
                "-",
                f["seconds"] / raw_s,
            )
        )
    c = res.get("dry_cold")
    rows.append(
        (
            "  first night (cold embedding cache)",
            f"{c['seconds']:.1f} s; peak RSS {c['peak_rss_mb']:.0f} MB"
            if c
            else "cache reused (--db-dir)",
            "-",
            c["seconds"] / raw_s if c else None,
        )
    )
    if a is None:
        rows.append(("second-night apply", "not run (--skip-apply)", "<= 2x dry run", None))
    else:
        rows += [
            (
                "second-night apply / dry run time",
                f"{a['seconds'] / d['seconds']:.2f}x",
                "<= 2x",
                a["seconds"] / raw_s,
            ),
            (
                "  model calls / embeddings / writes",
                f"{a['model_calls']} / {a['embedded']} / {a['writes']}"
                + (" (records changed)" if a["records_changed"] else ""),
                "0 / 0 / 0",
                None,
            ),
        ]
    rows += [
        (
            "first-night embedding",
            f"{e['per_s']:,} texts/s ({e['threads']} threads, median of 3)",
            ">= 350/s",
            None,
        ),
        (
            f"JSONL import, {n:,} records",
            f"{i['per_s']:,} rec/s",
            ">= 50k rec/s",
            i["seconds"] / raw_s,
        ),
        ("  peak RSS, import", f"{i['peak_rss_mb']:.0f} MB", "flat", None),
    ]
    if "import_shuffled" in res:  # ids as a store's export holds them (uuids), not sorted
        sh = res["import_shuffled"]
        rows += [
            (f"  same lines, random id order ({sh['peak_rss_mb']:.0f} MB)",
             f"{sh['per_s']:,} rec/s", ">= 50k rec/s", sh["seconds"] / raw_s),
        ]  # fmt: skip
    if "recall" in res:
        rows.append(
            (
                "recall p95, 100k memories, one actor",
                f"{res['recall']['p95_ms']} ms",
                "<= 25 ms",
                None,
            )
        )
    else:
        rows.append(("recall p95, 100k memories", "not run (--recall)", "<= 25 ms", None))
    rows += grouping_rows(res.get("grouping"))
    pf = res.get("prefect")
    rows.append(
        (
            "Prefect flow overhead, running server, 13 records",
            f"{pf['overhead_s']:.1f} s (first run in a process {pf['overhead_first_s']:.1f} s)"
            if pf
            else "not run (--prefect)",
            "<= 5 s",
            None,
        )
    )
    return [
        {"measure": m, "figure": f, "target": t, "x_raw_scan": None if r is None else round(r, 1)}
        for m, f, t, r in rows
    ]


GROUPING_SIZES = (25_000, 50_000)  # twice the records: near-linear time is about twice the time


def one_subject(n: int) -> dict:
    """``bench/one_subject_memory.py --records n``: three nights (first, cold, warm), each a
    default dry run in a fresh process, with its own peak RSS."""
    out = subprocess.run(
        [sys.executable, str(REPO / "bench" / "one_subject_memory.py"), "--records", str(n), "--json"],
        cwd=REPO, capture_output=True, text=True,
    )  # fmt: skip
    if out.returncode not in (0, 1):  # 1: ran, over the memory target (the row shows it)
        raise RuntimeError(out.stderr[-2000:])
    return dict(json.loads(out.stdout))


def grouping_rows(g: dict | None) -> list[tuple]:
    if not g:
        return [("grouping, one actor, 50,000 records on one subject", "not run (--grouping)",
                 "<= 400 MB; near-linear", None)]  # fmt: skip
    small, big = (g[str(k)] for k in GROUPING_SIZES)
    nights = ("first", "cold", "warm")
    return [
        (
            f"grouping, one actor, {GROUPING_SIZES[1]:,} records on one subject: "
            "peak RSS first / cold / warm night",
            " / ".join(f"{big[k]['peak_rss_mb']:.0f}" for k in nights) + " MB",
            "<= 400 MB",
            None,
        ),
        (
            f"  dry run time, {GROUPING_SIZES[0]:,} -> {GROUPING_SIZES[1]:,} records (cold / warm)",
            " / ".join(
                f"{small[k]['seconds']} -> {big[k]['seconds']} s ({big[k]['seconds'] / small[k]['seconds']:.2f}x)"
                for k in ("cold", "warm")
            ),
            "near-linear (~2x)",
            None,
        ),
    ]


def cpu_probe() -> float:
    """Seconds for a fixed pure-Python loop (10M additions), best of three: how fast this
    machine's cores were at the time. A shared VM's speed drifts by 1.5x within an hour;
    two tables compare only where their probes agree."""
    best = float("inf")
    for _ in range(3):
        t0, total = time.perf_counter(), 0
        for i in range(10_000_000):
            total += i
        best = min(best, time.perf_counter() - t0)
    return round(best, 3)


def bytecode_missing() -> list[str]:
    """Packages the runs import whose bytecode is not cached. Users' installs have it (pip
    compiles at install; `./dev` syncs with --compile-bytecode); without it each process
    start compiles its imports again, ~1 s of CPU a process here, and the table says so."""
    import importlib.util

    missing = []
    for name in ("memlife", "numpy", "pydantic", "pyarrow", "anthropic", "prefect"):
        spec = importlib.util.find_spec(name)
        origin = spec.origin if spec else None
        if origin and not Path(importlib.util.cache_from_source(origin)).exists():
            missing.append(name)
    return missing


def render(rows: list[dict], res: dict) -> str:
    lines = ["| measure | figure | target | time / raw scan |", "|---|---|---|---|"]
    for r in rows:
        x = "" if r["x_raw_scan"] is None else f"{r['x_raw_scan']}x"
        lines.append(f"| {r['measure']} | {r['figure']} | {r['target']} | {x} |")
    lines.append(f"\n{res['cpus']} CPUs; load average at end {res['load_avg_at_end']}; CPU probe at "
                 f"start / end {res['cpu_probe_s'][0]} / {res['cpu_probe_s'][-1]} s")  # fmt: skip
    if res.get("bytecode_missing"):
        lines.append(f"NOT COMPARABLE: no cached bytecode for {', '.join(res['bytecode_missing'])} "
                     "(every process start compiles them; run ./dev, or uv sync --compile-bytecode)")  # fmt: skip
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
