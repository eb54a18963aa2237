"""Speed bounds that once were asserted inside tests, measured here instead (the tests keep
what is not a clock: results, memory, a killed child). Each figure is CPU seconds of a
child process, best of ``--repeat``, beside a raw baseline measured in the same run:

- ``memlife --help``                   vs. ``python -c pass``
- a dry run of 13 demo records, no Prefect API configured (the local engine)
                                       vs. ``python -c "import memlife.pipeline"``
- the text signals (statement key, negation) of a 10 MB text
                                       vs. sha256 of the same 10 MB
- recall over a store holding a 10 MB record and a short one
                                       vs. recall over the short one alone
- an apply night over one group of two 10 MB records
                                       vs. the same night over two short records
- the depth check of a hostile 1 MiB import line (an unterminated string of \\")
                                       vs. json.loads of a valid 1 MiB line (same imports)
- the statement key, the numbers with units, the clauses and the list items of 64 kB runs
  that were quadratic until session 37 (a run of "=" or "-", one long token, spaces)
                                       vs. the same functions on ordinary 64 kB text

CPU time, not wall: on a shared 2-core machine wall time measures the neighbours. Each row
also carries the bound its test once asserted; the script exits 1 when a figure is past
it (a regression to look at, on a machine as loaded as the one the bound was set on).

    uv run python bench/bounds.py [--repeat 3] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

_SIGNALS = """
from memlife.text import negates, norm_sha256
big = "The user never drinks coffee. " * 340_000
norm_sha256(big), negates(big)
"""
_SHA = """
import hashlib
hashlib.sha256(("The user never drinks coffee. " * 340_000).encode()).hexdigest()
"""
_RECALL = """
import os, sys
from datetime import UTC, datetime
from memlife.model import MemoryRecord, MemoryType
from memlife.online.memory import LongTermMemory
from memlife.stores.sqlite import SqliteStore
s = SqliteStore(os.environ["MEMLIFE_HOME"] + "/big.db")
at = datetime(2026, 1, 1, tzinfo=UTC)
recs = [MemoryRecord(id="tea", actor_id="u", namespace="/n", content="Likes green tea.",
                     created_at=at, memory_type=MemoryType.semantic)]
if sys.argv[1] == "big":
    recs.append(MemoryRecord(id="big", actor_id="u", namespace="/n", created_at=at,
                             content=("lorem ipsum dolor sit amet " * 400_000)[:10_000_000],
                             memory_type=MemoryType.semantic))
s.put_many(recs)
assert LongTermMemory(s).recall("u", "which tea does the user like?", k=2)[0].record.id == "tea"
"""
_GROUP = """
import os, sys
from datetime import UTC, datetime, timedelta
from memlife.model import MemoryRecord, MemoryType
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore
now = datetime(2026, 11, 1, 12, tzinfo=UTC)
n = 340_000 if sys.argv[1] == "big" else 1
texts = [("the user likes green tea a lot " * n)[:10_000_000],
         ("the user likes green tea very much " * n)[:10_000_000]]
s = SqliteStore(os.environ["MEMLIFE_HOME"] + "/memlife.db")
s.put_many([MemoryRecord(id=f"m-{i}", actor_id="u", namespace="/users/u/notes",
                         memory_type=MemoryType.semantic, subject="tea", content=c,
                         created_at=now - timedelta(days=30 - i)) for i, c in enumerate(texts)])
s.close()
r = run_local(RunConfig(dry_run=False, now=now, workers=1))
assert r.status == "success" and r.lifecycle["consolidated"] == 1, r.as_json()
"""
_HOSTILE = """
from memlife.import_lines import json_depth
line = b'{"id":"m-q","a":"' + b"[" * 20 + b'\\\\"' * 524_000 + b"}"
assert json_depth(line) == 1
"""
_VALID = """
import json
import memlife.import_lines
json.loads(b'{"id":"m-q","a":"' + b"x" * 1_048_000 + b'"}')
"""
_RUNS = """
from memlife.consolidate.coverage import _items
from memlife.consolidate.grounding import clauses, specifics
from memlife.text import norm_sha256
n = 64_000
norm_sha256("a" + "=" * n), norm_sha256("a" + "-" * n)
specifics("x" * n), clauses("a" + " " * n + "b"), _items("a" + " " * n + "b")
"""
_RUNS_RAW = """
from memlife.consolidate.coverage import _items
from memlife.consolidate.grounding import clauses, specifics
from memlife.text import norm_sha256
n = 64_000
norm_sha256("a " * (n // 2)), specifics("x " * (n // 2)), clauses("a b " * (n // 4))
_items("a b " * (n // 4))
"""
_DEMO = """
import os
from memlife.demo import generate
from memlife.stores.sqlite import SqliteStore
with SqliteStore(os.environ["MEMLIFE_HOME"] + "/memlife.db") as s:
    s.put_many(list(generate(13, seed=3)))
"""


def cpu_seconds(cmd: list[str], env: dict[str, str]) -> float:
    """CPU seconds (user + sys) of one child run; it must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO)
    if res.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:3])} failed:\n{res.stderr[-2000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def best(cmd: list[str], repeat: int, setup: list[str] | None = None) -> float:
    """Best of ``repeat`` runs, each in a fresh home (``setup`` runs there first, untimed)."""
    out = float("inf")
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as home:
            env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
            env |= {"MEMLIFE_HOME": home, "PREFECT_HOME": f"{home}/prefect"}
            if setup is not None:
                cpu_seconds(setup, env)
            out = min(out, cpu_seconds(cmd, env))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    py = sys.executable
    cli = [py, "-m", "memlife"]  # this checkout (cwd), not whatever the venv's script imports

    def code(src: str, *a: str) -> list[str]:
        return [py, "-c", textwrap.dedent(src), *a]

    # (name, command, raw baseline, untimed setup, the bound its test asserted in seconds)
    rows = [
        ("memlife --help", [*cli, "--help"], code("pass"), None, 1.0),
        ("dry run, 13 records, local engine",
         [*cli, "run", "--dry-run", "--now", "2026-11-01T00:00:00Z"],
         code("import memlife.pipeline"), code(_DEMO), 10.0),
        ("text signals of 10 MB", code(_SIGNALS), code(_SHA), None, 1.5),
        ("recall beside a 10 MB record", code(_RECALL, "big"), code(_RECALL, "small"), None, 8.0),
        ("apply night, a group of two 10 MB records", code(_GROUP, "big"), code(_GROUP, "small"),
         None, 40.0),
        ("depth check of a hostile 1 MiB import line", code(_HOSTILE), code(_VALID), None, 1.0),
        ("text runs of 64 kB (=, -, one token, spaces)", code(_RUNS), code(_RUNS_RAW), None, 2.0),
    ]  # fmt: skip
    results, over = [], []
    print(f"{'bound':44s} {'CPU s':>8s} {'raw s':>8s} {'x raw':>7s} {'bound s':>8s}")
    for name, cmd, raw, setup, bound in rows:
        got, base = best(cmd, args.repeat, setup), best(raw, args.repeat, setup)
        results.append({"bound": name, "cpu_s": round(got, 3), "raw_cpu_s": round(base, 3),
                        "bound_s": bound})  # fmt: skip
        flag = "" if got <= bound else "  OVER"
        print(f"{name:44s} {got:8.2f} {base:8.2f} {got / max(base, 1e-9):7.1f} {bound:8.1f}{flag}",
              flush=True)  # fmt: skip
        if got > bound:
            over.append(name)
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2))
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
