"""JSONL import alone (issue 16's import row), for several worker counts in turn.

Each run is a fresh child process importing the whole file into a new SQLite store with
``memlife.importer.import_file`` (``now`` = bench/table.py's NOW, so no demo record is
dated in the future); the parent samples the RSS of the child and its worker processes
every 20 ms (peak of the sum). Printed per run: records/s (wall), CPU a record summed
over the processes and split into main and workers, peak RSS summed. ``default``: what
``memlife import`` does (two processes that parse and write in turn for a file of 16 MiB
or more, memlife/import_turns.py); 0: parse and write in the importing process (threads);
N: N processes in turn.

``--shuffled`` imports the same lines in a random order (a fixed seed; the copy is written
once beside the file): ids arrive as a store's export of uuids would, not in the demo's
id order.

    uv run python bench/import_rate.py /tmp/memlife-bench/n1000000/imp/records.jsonl \\
        --workers default 1 [--shuffled]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
NOW = "2026-11-01T00:00:00+00:00"  # bench/table.py's


def child(src: Path, db: Path, workers: str) -> dict:
    from memlife.importer import import_file
    from memlife.stores.sqlite import SqliteStore

    store = SqliteStore(db)
    kw = {} if workers == "default" else {"workers": int(workers)}
    t0, c0 = time.perf_counter(), os.times()
    rep = import_file(store, src, now=datetime.fromisoformat(NOW), **kw)
    s, c1 = time.perf_counter() - t0, os.times()
    store.close()
    main = c1.user - c0.user + c1.system - c0.system
    kids = c1.children_user - c0.children_user + c1.children_system - c0.children_system
    n = max(rep.imported, 1)
    return {
        "workers": workers,
        "records": rep.imported,
        "invalid": len(rep.invalid),
        "seconds": round(s, 2),
        "per_s": round(n / s),
        "cpu_us_a_record": round((main + kids) / n * 1e6, 1),
        "main_us": round(main / n * 1e6, 1),
        "workers_us": round(kids / n * 1e6, 1),
    }


def run(src: Path, workers: str) -> dict:
    import psutil

    with tempfile.TemporaryDirectory(prefix="memlife-import-") as tmp:
        cmd = [sys.executable, __file__, "--_child", str(src), str(Path(tmp) / "s.db"), workers]
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        proc = psutil.Popen(cmd, stdout=subprocess.PIPE, env=env)
        peak, stop = 0, threading.Event()

        def sample() -> None:
            nonlocal peak
            while not stop.is_set():
                total = 0
                try:
                    for p in [proc, *proc.children(recursive=True)]:
                        total += p.memory_info().rss
                except psutil.Error:
                    pass
                peak = max(peak, total)
                stop.wait(0.02)

        t = threading.Thread(target=sample, daemon=True)
        t.start()
        out, _ = proc.communicate()
        stop.set()
        t.join()
        if proc.returncode:
            raise SystemExit(f"import failed ({proc.returncode})")
    res: dict = json.loads(out.decode().strip().splitlines()[-1])
    res["peak_rss_mb_summed"] = round(peak / 2**20, 1)
    res["load_avg"] = [round(x, 2) for x in os.getloadavg()]
    return res


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--_child":
        print(json.dumps(child(Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4])))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("jsonl", type=Path)
    ap.add_argument("--workers", nargs="+", default=["default"], help="'default' or a number")
    ap.add_argument("--shuffled", action="store_true", help="the lines in a random order")
    args = ap.parse_args()
    src = shuffled(args.jsonl.resolve()) if args.shuffled else args.jsonl.resolve()
    for w in args.workers:
        print(
            json.dumps({**run(src, w), "order": "shuffled" if args.shuffled else "file"}),
            flush=True,
        )


def shuffled(src: Path, seed: int = 7) -> Path:
    """The file's lines in a random order (seeded), written once as ``<name>.shuffled``."""
    import random

    out = src.with_name(src.name + ".shuffled")
    if not out.exists() or out.stat().st_mtime < src.stat().st_mtime:
        lines = src.read_bytes().splitlines(keepends=True)
        if lines and not lines[-1].endswith(b"\n"):
            lines[-1] += b"\n"
        random.Random(seed).shuffle(lines)
        tmp = out.with_name(out.name + ".tmp")
        tmp.write_bytes(b"".join(lines))
        tmp.replace(out)
    return out


if __name__ == "__main__":
    main()
