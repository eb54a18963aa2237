"""The dry run (memlife.pipeline.run_local and `memlife run --dry-run --engine local`).

It changes nothing in the store, writes a content-free report (JSONL + Parquet) with one
row per record, honours the scope filters, and is reproducible under a fixed cutoff.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import shutil
import sqlite3
import subprocess
import sys
from collections import Counter, defaultdict
from datetime import UTC, datetime
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from memlife.cli import app
from memlife.demo import PREFERENCES, generate
from memlife.model import plan_view
from memlife.pipeline import RunConfig, run_local
from memlife.plan import Action, Planner
from memlife.policy import load_policy
from memlife.stores.sqlite import SqliteStore

ANCHOR = datetime(2026, 11, 1, tzinfo=UTC)
N = 1500
FIELDS = {"id", "actor_id", "namespace", "action", "reasons", "score"}
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list]:
    path = tmp_path_factory.mktemp("demo") / "memlife.db"
    records = list(generate(N, seed=7, anchor=ANCHOR, markers=True))
    store = SqliteStore(path)
    for i in range(0, N, 1000):
        store.put_many(records[i : i + 1000])
    store.close()
    return path, records


@pytest.fixture()
def db(home: Path, demo_db: tuple[Path, list]) -> Path:
    """A private copy of the demo store at MEMLIFE_STORE's path."""
    home.mkdir(parents=True, exist_ok=True)
    target = home / "memlife.db"
    shutil.copyfile(demo_db[0], target)
    return target


def config(full: bool = False, **kw) -> RunConfig:
    """A dry run at the demo anchor; planning only unless ``full`` (default pipeline, consolidator too)."""
    if not full and "consolidate" in set(RunConfig.model_fields):
        kw.setdefault("consolidate", False)
    return RunConfig(dry_run=True, now=ANCHOR, **kw)


def rows_of(path: Path, sql: str = "SELECT * FROM records ORDER BY id") -> list[tuple]:
    c = sqlite3.connect(path)
    try:
        return c.execute(sql).fetchall()
    finally:
        c.close()


def export(path: Path) -> str:
    s = SqliteStore(path)
    try:
        return "".join(r.to_json() + "\n" for r in s.iter_all())
    finally:
        s.close()


def read_jsonl(path: str | Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def test_dry_run_leaves_every_record_byte_identical(db: Path) -> None:
    before_export, before_rows = export(db), rows_of(db)
    assert before_export.count("\n") == N
    summary = run_local(config(full=True))
    assert summary.records == N
    assert export(db) == before_export
    assert rows_of(db) == before_rows


def test_dry_run_leaves_store_file_unchanged(db: Path) -> None:
    schema = "SELECT type, name, sql FROM sqlite_master ORDER BY name"
    before_schema = rows_of(db, schema)
    before_sha = hashlib.sha256(db.read_bytes()).hexdigest()
    run_local(config())
    assert rows_of(db, schema) == before_schema
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before_sha


def test_report_one_row_per_record_exact_fields(db: Path, demo_db: tuple[Path, list]) -> None:
    summary = run_local(config())
    rows = read_jsonl(summary.report)
    assert len(rows) == N
    assert all(set(r) == FIELDS for r in rows)
    ids = [r["id"] for r in rows]
    assert len(set(ids)) == N
    assert set(ids) == {r.id for r in demo_db[1]}
    assert {r["action"] for r in rows} <= {a.value for a in Action}
    table = pq.read_table(summary.report_parquet)
    assert set(table.column_names) == FIELDS
    assert table.num_rows == N
    assert sorted(table.to_pylist(), key=lambda r: r["id"]) == sorted(rows, key=lambda r: r["id"])
    counts = Counter(r["action"] for r in rows)
    assert summary.counts == {a.value: counts.get(a.value, 0) for a in Action}
    assert sum(summary.counts.values()) == summary.records == N
    for r in rows:  # a delete never carries a score; everything else that was planned does
        if r["action"] == "delete_expired":
            assert r["score"] is None
        if r["score"] is not None:
            assert 0.0 <= r["score"] <= 1.0


def test_report_matches_the_planner(db: Path, demo_db: tuple[Path, list], tmp_path: Path) -> None:
    """The pipeline's fast store path decides exactly what the planner decides on the records.

    Subject inference is off here: it reads content and embeddings (tested in test_realmem)."""
    import yaml

    raw = yaml.safe_load(Path("policies/default.yaml").read_text())
    raw["inference"]["enabled"] = False
    policy = tmp_path / "no-inference.yaml"
    policy.write_text(yaml.safe_dump(raw))
    summary = run_local(config(page_size=37, policy=str(policy)))
    got = {r["id"]: (r["action"], r["reasons"]) for r in read_jsonl(summary.report)}
    planner = Planner(load_policy(policy), ANCHOR)
    shards: dict[tuple, list] = defaultdict(list)
    for r in demo_db[1]:
        shards[(r.actor_id, r.namespace)].append(plan_view(r))
    want = {}
    for views in shards.values():
        for d in planner.plan_shard([sorted(views, key=lambda v: v.id)]):
            want[d.id] = (d.action.value, [x.value for x in d.reasons])
    assert got == want


def _canaries(records: list) -> set[str]:
    return {r.content.rsplit("[canary ", 1)[1].rstrip("]") for r in records}


def _scan(text: str, canaries: set[str]) -> set[str]:
    return {text[i : i + 16] for i in range(len(text) - 15)} & canaries


def test_no_content_in_report_or_manifest(db: Path, home: Path, demo_db: tuple[Path, list]) -> None:
    records = demo_db[1]
    canaries = _canaries(records)
    assert len(canaries) == N
    summary = run_local(config(full=True))
    files = [
        p
        for p in home.rglob("*")
        if p.is_file() and p.name != "memlife.db" and not p.name.startswith("memlife.db-")
    ]
    names = {p.name for p in files}
    assert {"proposed-actions.jsonl", "proposed-actions.parquet", "manifest.json"} <= names
    fragments = ["[canary", *{p[1] for p in PREFERENCES}]
    for p in files:
        if p.suffix == ".parquet":
            text = json.dumps(pq.read_table(p).to_pylist())
        else:
            text = p.read_text(encoding="utf-8", errors="replace")
        assert not _scan(text, canaries), f"content canary leaked into {p}"
        for frag in fragments:
            assert frag not in text, f"content {frag!r} leaked into {p}"
    # the scan itself works: it finds canaries where content is
    assert _scan(export(db), canaries) == canaries
    manifest = json.loads(Path(summary.manifest).read_text())
    assert manifest["run_id"] == summary.run_id
    assert manifest["policy_version"] == summary.policy_version
    assert manifest["cutoff"] == ANCHOR.isoformat()
    assert manifest["mode"] == "dry_run"


def _store_shards(records: list) -> Counter:
    return Counter((r.actor_id, r.namespace) for r in records)


@pytest.mark.parametrize(
    ("namespaces", "actors"),
    [
        (("/users/*/episodes",), ()),
        (("/users/*/preferences", "/users/*/support"), ()),
        ((), ("u-000003",)),
        ((), ("u-000003", "u-000017")),
        (("/users/*/facts",), ("u-000003", "u-000017")),
        (("/nobody/*",), ()),
    ],
    ids=["one-glob", "two-globs", "one-actor", "two-actors", "glob-and-actors", "matches-nothing"],
)
def test_scope_filters(db: Path, demo_db: tuple[Path, list], namespaces, actors) -> None:
    expected = {
        r.id
        for r in demo_db[1]
        if (not namespaces or any(fnmatch.fnmatchcase(r.namespace, g) for g in namespaces))
        and (not actors or r.actor_id in actors)
    }
    summary = run_local(config(namespaces=namespaces, actors=actors))
    rows = read_jsonl(summary.report)
    assert {r["id"] for r in rows} == expected
    assert summary.records == len(rows) == len(expected)
    manifest = json.loads(Path(summary.manifest).read_text())
    assert manifest["scope"] == {"namespaces": sorted(namespaces), "actors": sorted(actors)}


def test_scoped_runs_get_distinct_run_ids(db: Path) -> None:
    a = run_local(config(namespaces=("/users/*/facts",)))
    b = run_local(config(namespaces=("/users/*/episodes",)))
    c = run_local(config(namespaces=("/users/*/facts",)))
    assert a.run_id != b.run_id
    assert a.run_id == c.run_id
    # the same run, another attempt: its own report (attempts never share a file), same rows
    assert Path(a.report) != Path(c.report)
    assert a.run_id in Path(a.report).parts and a.run_id in Path(c.report).parts
    assert sorted(read_jsonl(a.report), key=lambda r: r["id"]) == sorted(
        read_jsonl(c.report), key=lambda r: r["id"]
    )
    assert Path(a.report) != Path(b.report)
    assert all(r["namespace"].endswith("/episodes") for r in read_jsonl(b.report))


def test_rerun_is_reproducible(db: Path) -> None:
    first = run_local(config())
    first_rows = read_jsonl(first.report)
    manifest_before = Path(first.manifest).read_bytes()
    second = run_local(config(page_size=11, shards_per_batch=3))
    assert second.run_id == first.run_id
    assert second.counts == first.counts
    assert sorted(read_jsonl(second.report), key=lambda r: r["id"]) == sorted(
        first_rows, key=lambda r: r["id"]
    )
    assert Path(second.manifest).read_bytes() == manifest_before  # evidence is never overwritten


def test_cli_run_dry_run_json_local(db: Path) -> None:
    res = CliRunner().invoke(
        app, ["run", "--dry-run", "--json", "--engine", "local", "--now", "2026-11-01T00:00:00Z"]
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert {"run_id", "policy_version", "cutoff", "counts", "report"} <= set(out)
    assert out["cutoff"] == ANCHOR.isoformat()
    assert out["policy_version"] == load_policy("policies/default.yaml").version
    assert set(out["counts"]) == {a.value for a in Action}
    assert sum(out["counts"].values()) == out["records"] == N
    assert len(read_jsonl(out["report"])) == N
    direct = run_local(config(full=True))  # the CLI's defaults: consolidation on
    assert out["counts"] == direct.counts
    assert out["run_id"] == direct.run_id


def test_cli_scope_filters(db: Path, demo_db: tuple[Path, list]) -> None:
    args = [
        "run",
        "--dry-run",
        "--json",
        "--engine",
        "local",
        "--now",
        "2026-11-01T00:00:00Z",
        "--namespace",
        "/users/*/procedures",
        "--namespace",
        "/users/*/support",
        "--actor",
        "u-000001",
        "--actor",
        "u-000002",
    ]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    rows = read_jsonl(out["report"])
    expected = {
        r.id
        for r in demo_db[1]
        if r.actor_id in ("u-000001", "u-000002")
        and r.namespace.rsplit("/", 1)[1] in ("procedures", "support")
    }
    assert expected and {r["id"] for r in rows} == expected


def test_cli_rejects_naive_now(db: Path) -> None:
    r = CliRunner().invoke(
        app, ["run", "--dry-run", "--engine", "local", "--now", "2026-11-01T00:00:00"]
    )
    assert r.exit_code == 2
    assert "timezone" in r.stderr


def test_memlife_source_never_imports_prefect() -> None:
    import ast

    files = sorted((REPO / "memlife").rglob("*.py"))
    assert len(files) >= 15
    offenders = []
    for f in files:
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            elif (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", getattr(node.func, "attr", ""))
                in ("import_module", "__import__")
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                names = [str(node.args[0].value)]
            offenders += [
                f"{f.relative_to(REPO)}:{node.lineno}"
                for n in names
                if n == "prefect" or n.startswith("prefect.")
            ]
    assert not offenders, offenders


def test_pipeline_and_cli_run_without_prefect_loaded() -> None:
    code = (
        "import sys\n"
        "import memlife.pipeline, memlife.cli, memlife.demo, memlife.stores.sqlite, memlife.report\n"
        "bad = sorted(k for k in sys.modules if k == 'prefect' or k.startswith('prefect.'))\n"
        "assert not bad, bad[:5]\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=180
    )
    assert res.returncode == 0, res.stderr[-2000:]


def test_report_keeps_one_copy_of_a_shard_written_twice(tmp_path: Path) -> None:
    """A retried batch (throttling) must not duplicate its shards' report rows."""
    from memlife.plan import Action, Decision, Reason
    from memlife.report import ReportWriter

    report = ReportWriter(tmp_path / "r")
    shard = [Decision(f"m-{i}", "a", "/n", Action.retain, [Reason.SCORE_OK], 0.5) for i in range(3)]
    report.write(shard)
    report.write(shard)
    report.write([Decision("m-9", "a", "/other", Action.review, [Reason.MISSING_OWNER], 0.1)])
    report.close()
    assert len(report.jsonl_path.read_text().splitlines()) == 4
    import pyarrow.parquet as pq

    assert pq.read_table(report.parquet_path).num_rows == 4


def test_a_dry_run_reads_cloudtrail_without_writing_the_ledger(home: Path, tmp_path: Path) -> None:
    """Adversarial review: `run --dry-run --cloudtrail` ingested the logs: it wrote ledger
    parts and the per-file markers, so the apply run skipped those files. A dry run counts
    the same accesses in memory and writes nothing; the apply run then ingests them."""
    from memlife.run_start import load_access_stats
    from tests.unit.test_ledger import _log_files

    trail = tmp_path / "trail"
    trail.mkdir()
    for name, data in _log_files().items():
        (trail / name).write_bytes(data)
    cutoff = datetime(2026, 1, 1, tzinfo=UTC)
    dry = load_access_stats(cutoff, None, str(trail), dry_run=True)
    assert not (home / "ledger").exists()
    by_id = {rid: got for (_, rid), got in dry.items()}
    assert by_id["mr-1"].count == 2 and by_id["mr-7"].count == 1
    applied = load_access_stats(cutoff, None, str(trail))
    assert applied == dry and any((home / "ledger" / "_ingested").rglob("*"))
    again = load_access_stats(cutoff, None, str(trail), dry_run=True)  # nothing counted twice
    assert again == applied


def test_an_enforcement_glob_that_matches_no_namespace_is_named(home: Path, tmp_path: Path) -> None:
    """Adversarial review (left before): a typo in an `enforce_deletion_in` glob that is
    still a glob ("/user/*/episodes") enforced nothing, silently. An unscoped run names each
    glob no namespace of the store matches; a scoped run (part of the store) does not."""
    from memlife.model import MemoryRecord

    store = SqliteStore(home / "memlife.db")
    try:
        store.put_many([MemoryRecord(id="e-1", actor_id="u-1", namespace="/users/u-1/episodes",
                                     memory_type="episodic", content="Visited Porto.",
                                     created_at=datetime(2026, 1, 5, tzinfo=UTC))])  # fmt: skip
    finally:
        store.close()
    text = Path("policies/default.yaml").read_text()
    policy = tmp_path / "typo.yaml"
    policy.write_text(text.replace('"/users/*/episodes"', '"/user/*/episodes"'))
    now = datetime(2026, 2, 1, tzinfo=UTC)
    typo = run_local(RunConfig(dry_run=True, now=now, policy=str(policy)))
    unmatched = {k for k in typo.other if k.startswith("enforcement_glob_unmatched:")}
    # the typo, and the globs of namespaces this store does not have yet; not the one it has
    assert "enforcement_glob_unmatched:/user/*/episodes" in unmatched
    assert "enforcement_glob_unmatched:/users/*/facts" in unmatched
    plain = run_local(RunConfig(dry_run=True, now=now))
    assert "enforcement_glob_unmatched:/users/*/episodes" not in plain.other
    scoped = run_local(RunConfig(dry_run=True, now=now, policy=str(policy), actors=("u-1",)))
    assert not any(k.startswith("enforcement_glob_unmatched:") for k in scoped.other)


def test_what_a_dry_run_says_an_apply_run_would_do_is_what_it_does(db: Path) -> None:
    """Session 29 walk-through: without an evaluation set the dry run's "an apply run would"
    column counted every deletion and consolidation, though the apply run's gate withholds
    the judgements in enforced namespaces (only the gate line said so)."""
    from memlife.would_change import would_change

    dry = run_local(config(full=True)).as_json()
    would = dict(would_change(dry))
    assert would["withhold, no eval set: deletions"] > 0  # the case this test is about
    applied = run_local(RunConfig(dry_run=False, now=ANCHOR)).as_json()
    done = applied["lifecycle"]
    assert done["deleted"] == would["delete"]
    assert done["consolidated"] == would["consolidate (groups)"]
