"""Audit 44e (session 44): export, import and backup round trips attacked as an operator and a hostile
file would (records through the real SQLite store and the real `memlife` CLI; erasures
and access histories beside them)."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from memlife.cli import app
from memlife.erasure_export import LINE_MAX
from memlife.ledger import AccessLedger
from memlife.model import MemoryRecord
from memlife.stores.sqlite import SqliteStore
from tests.support.records import good
from tests.unit.test_import_export import write_jsonl

SECRET = "Was treated for depression in 2025."


@pytest.fixture()
def runner() -> CliRunner:
    return CliRunner()


def _ok(runner: CliRunner, *args: str) -> str:
    res = runner.invoke(app, list(args))
    assert res.exit_code == 0, res.output
    return res.stdout


# -- bugs ----------------------------------------------------------------------------------


def _now() -> str:
    """A reused id's record is created after the erasure (audit 49vi: one created before
    it is the erased record)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_an_older_backup_of_a_reused_id_erased_again_does_not_bring_its_text_back(
    home: Path, tmp_path: Path, runner: CliRunner
) -> None:
    """The adversary is time: m-1 was erased, its id used again for SECRET, a backup
    taken, and SECRET erased too (tombstone 'm-1#<hex>'). The operator restores that
    backup with today's erasures. SECRET must not be active in the new store and the
    store must hold both tombstones, as it does when the id was never reused."""
    old, new = f"sqlite:///{tmp_path / 'old.db'}", f"sqlite:///{tmp_path / 'new.db'}"
    first = write_jsonl(tmp_path / "a.jsonl", [json.dumps(good("m-1", content="Likes tea."))])
    _ok(runner, "import", str(first), "--store", old)
    _ok(runner, "erase", "--actor", "u-1", "--id", "m-1", "--yes", "--store", old)
    reused = write_jsonl(
        tmp_path / "b.jsonl",
        [
            json.dumps(good("m-1", content=SECRET, created_at=_now())),
            json.dumps(good("m-2", content="Likes jazz.")),
        ],
    )
    _ok(runner, "import", str(reused), "--store", old)
    _ok(runner, "export", "--store", old, "-o", str(tmp_path / "backup.jsonl"))
    _ok(runner, "erase", "--actor", "u-1", "--id", "m-1", "--yes", "--store", old)
    _ok(runner, "export", "--store", old, "-o", str(tmp_path / "now.jsonl"),
        "--erasures", str(tmp_path / "e.jsonl"))  # fmt: skip
    runner.invoke(app, ["import", str(tmp_path / "backup.jsonl"), "--store", new,
                        "--erasures", str(tmp_path / "e.jsonl")])  # fmt: skip
    with SqliteStore(tmp_path / "new.db") as s:
        assert [r.id for r in s.iter_all() if r.content == SECRET] == []
        assert s.get("m-2") is not None
        assert len(s.tombstones("u-1")) >= 2


def test_a_record_at_the_policys_content_limit_survives_export_and_import(
    home: Path, tmp_path: Path, runner: CliRunner
) -> None:
    """The operator's policy admits 1 MiB of content; a record of exactly that size is
    in the store. `export` then `import --policy` (the same policy, default flags) into an
    empty store must bring it over: the export is the store's own import contract."""
    policy = yaml.safe_load(Path("policies/default.yaml").read_text())
    policy["version"] = "big-content"
    policy["limits"] = {"content_max_bytes": 1 << 20}
    pfile = tmp_path / "p.yaml"
    pfile.write_text(yaml.safe_dump(policy))
    rec = MemoryRecord.model_validate(good("m-big", content="a" * (1 << 20)))
    with SqliteStore(tmp_path / "one.db") as s:
        assert not s.put_many([rec]).failed
    out = tmp_path / "out.jsonl"
    _ok(runner, "export", "--store", f"sqlite:///{tmp_path / 'one.db'}", "-o", str(out))
    res = runner.invoke(app, ["import", str(out), "--store", f"sqlite:///{tmp_path / 'two.db'}",
                              "--policy", str(pfile), "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    with SqliteStore(tmp_path / "two.db") as s:
        got = s.get("m-big")
    assert got == rec


# -- weak tests ----------------------------------------------------------------------------


def test_an_access_file_with_times_as_large_strings_is_read(
    home: Path, tmp_path: Path, runner: CliRunner
) -> None:
    """A ledger written by another tool (Polars writes every string column as
    large_string): ISO times with a zone in a large_string `accessed_at` are reads, added
    once, never refused as a column of the wrong type."""
    src = write_jsonl(tmp_path / "r.jsonl", [json.dumps(good("m-1"))])
    reads = tmp_path / "reads.parquet"
    pq.write_table(
        pa.table({
            "actor_id": pa.array(["u-1"], pa.large_string()),
            "namespace": pa.array(["/users/u-1/preferences"], pa.large_string()),
            "record_id": pa.array(["m-1"], pa.large_string()),
            "accessed_at": pa.array(["2026-01-03T10:00:00+02:00"], pa.large_string()),
            "rank": pa.array([1], pa.int32()), "query_sha256": pa.array([None], pa.large_string()),
        }),
        reads,
    )  # fmt: skip
    res = runner.invoke(app, ["import", str(src), "--store", f"sqlite:///{tmp_path / 'n.db'}",
                              "--access", str(reads), "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["access"]["rows"] == 1
    stats = AccessLedger(home / "ledger").actor_stats()
    assert stats[("u-1", "m-1")].count == 1


def _tombstone_line(size: int) -> bytes:
    """A valid tombstone line of exactly ``size`` bytes, its newline included."""
    body = json.dumps({"kind": "tombstone", "actor_id": "u-9", "record_id": "gone-1",
                       "content_sha256": "a" * 64, "norm_sha256": None})  # fmt: skip
    return (body[:-1] + " " * (size - len(body) - 1) + "}\n").encode()


def test_an_erasures_line_one_byte_over_the_bound_is_refused_at_the_bound_taken(
    home: Path, tmp_path: Path, runner: CliRunner
) -> None:
    """erasure_export.parse_erasures' ``len(line) > LINE_MAX``: a line of exactly LINE_MAX
    bytes is a tombstone like any other; one byte more refuses the file by line number,
    before any record is imported."""
    src = write_jsonl(tmp_path / "r.jsonl", [json.dumps(good("m-1"))])
    for size, code in ((LINE_MAX, 0), (LINE_MAX + 1, 2)):
        erasures = tmp_path / f"e{size}.jsonl"
        erasures.write_bytes(_tombstone_line(size))
        db = tmp_path / f"s{size}.db"
        res = runner.invoke(app, ["import", str(src), "--store", f"sqlite:///{db}",
                                  "--erasures", str(erasures)])  # fmt: skip
        assert res.exit_code == code, (size, res.output)
        if code:
            assert "erasures line 1" in res.output and f"longer than {LINE_MAX}" in res.output
            assert not db.exists() or SqliteStore(db).get("m-1") is None


def test_a_pending_erasure_of_another_namespace_does_not_refuse_the_file(
    home: Path, tmp_path: Path, runner: CliRunner
) -> None:
    """_refuse_pending_not_held compares the record's actor AND namespace: a pending
    erasure of u-1's m-1 under another namespace is not this store's (unheld) m-1; it is
    listed not found, and the rest of the file (a tombstone) is applied."""
    src = write_jsonl(tmp_path / "r.jsonl", [json.dumps(good("m-1"))])
    erasures = tmp_path / "e.jsonl"
    erasures.write_text(
        _tombstone_line(300).decode()
        + json.dumps(
            {
                "kind": "pending_erasure",
                "record_id": "m-1",
                "actor_id": "u-1",
                "namespace": "/users/u-1/elsewhere",
                "reason": "REQUESTED",
                "requested_at": "2026-01-05T00:00:00Z",
            }
        )  # fmt: skip
        + "\n"
    )
    res = runner.invoke(app, ["import", str(src), "--store", f"sqlite:///{tmp_path / 's.db'}",
                              "--erasures", str(erasures), "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    carried = json.loads(res.stdout)["erasures"]
    assert carried["not_found"] == ["m-1"] and carried["tombstones_added"] == 1
    with SqliteStore(tmp_path / "s.db") as s:
        kept = s.get("m-1")
        assert kept is not None and kept.content == good("m-1")["content"]


# -- what held: the lossless round trip, as a property --------------------------------------

_TEXT = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=20).filter(
    str.strip
)
_ODD = st.sampled_from(
    ["a\x00b", "x\r\ny", "\u200f\u05e9\u05dc\u05d5\u05dd", "e\u0301", "\u00e9", "\u2028z",
     "\ufeffbom", "\\u0000", '"q"}\n{', "\t tab"]
)  # fmt: skip
_ZONES = st.sampled_from(
    [UTC, timezone(timedelta(hours=5, minutes=30)), timezone(-timedelta(hours=12))]
)
_TIMES = st.datetimes(datetime(1, 1, 2), datetime(9999, 12, 30), timezones=_ZONES)
_IDS = st.text("abcXYZ-_.09#", min_size=1, max_size=8)


@st.composite
def _records(draw: st.DrawFn) -> list[MemoryRecord]:
    out = []
    for i in range(draw(st.integers(1, 4))):
        status = draw(st.sampled_from(["active", "superseded", "pending_delete", "quarantined",
                                       "retained"]))  # fmt: skip
        maybe = st.none() | _TIMES
        out.append(MemoryRecord.model_validate(good(
            f"m{i}-{draw(_IDS)}", actor_id=draw(st.sampled_from(["u-1", "u-2"])),
            content=draw(_TEXT | _ODD), subject=draw(st.none() | _TEXT | _ODD),
            owner=draw(st.none() | _TEXT), created_at=draw(_TIMES),
            confidence=draw(st.floats(0, 1) | st.sampled_from([-0.0, 5e-324, 1 / 3])),
            access_count=draw(st.integers(0, 2**63 - 1)), last_accessed_at=draw(maybe),
            last_verified_at=draw(maybe), expires_at=draw(maybe), status_changed_at=draw(maybe),
            retention_class=draw(st.sampled_from(["standard", "sensitive", "legal_hold"])),
            status=status,
            provenance={"source_event": draw(st.none() | _TEXT), "policy_version": None,
                        "replaced_by": "r-1" if status == "superseded" else None,
                        "supersedes": draw(st.lists(_IDS, max_size=3)), "content_sha256": None},
        )))  # fmt: skip
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(_records())
def test_export_import_export_is_byte_identical_and_a_second_import_changes_nothing(
    home: Path, tmp_path_factory: pytest.TempPathFactory, records: list[MemoryRecord]
) -> None:
    """Records of every status and hold, hostile text (NUL, CRLF, RTL, NFC beside NFD, a
    BOM, a JSON-looking line break), times from year 1 to 9999 in any zone, counts past
    2**53, subnormal confidences: written through the store, exported, imported into an
    empty store and exported again, the two exports are the same bytes; importing the
    file again (plain, --update, with workers) stores nothing and says all unchanged."""
    d = tmp_path_factory.mktemp("rt")
    runner = CliRunner()
    try:
        with SqliteStore(d / "a.db") as s:
            assert not s.put_many(records).failed
        one, two = d / "one.jsonl", d / "two.jsonl"
        _ok(runner, "export", "--store", f"sqlite:///{d / 'a.db'}", "-o", str(one))
        b = f"sqlite:///{d / 'b.db'}"
        first = json.loads(_ok(runner, "import", str(one), "--store", b, "--json"))
        assert (first["imported"], first["invalid"]) == (len(records), [])
        _ok(runner, "export", "--store", b, "-o", str(two))
        assert two.read_bytes() == one.read_bytes()
        for extra in ([], ["--update"], ["--workers", "2"]):
            again = json.loads(_ok(runner, "import", str(one), "--store", b, "--json", *extra))
            assert (again["imported"], again["updated"], again["unchanged"]) == (
                0, 0, len(records)
            ), extra  # fmt: skip
            assert again["update_run"] is None
    finally:
        shutil.rmtree(d)
