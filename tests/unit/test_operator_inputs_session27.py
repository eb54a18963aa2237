"""Operator inputs the validators accepted and something later choked on (adversarial
review, session 27): a namespace without its leading '/', one bad CloudTrail object, an
unbounded thread count, spans of days or seconds that overflow, YAML merge keys."""

from __future__ import annotations

import gzip
import json
import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from memlife.cli import app
from memlife.errors import BAD_INPUT, SettingsError
from memlife.ledger import AccessLedger
from memlife.model import MemoryRecord, MemoryType
from memlife.namespaces import check_namespace, namespace_problem
from memlife.policy import MAX_DAYS, PolicyError, load_policy, warn_unrooted
from memlife.settings import settings
from memlife.stores.sqlite import SqliteStore

REPO = Path(__file__).resolve().parents[2]
DEFAULT = REPO / "policies" / "default.yaml"
runner = CliRunner()
NOW = "2026-12-01T02:00:00Z"


def _invoke(*args: str) -> Any:
    return runner.invoke(app, list(args))


# -- 1. a namespace without its leading '/' ------------------------------------------------
def _line(rid: str, namespace: str) -> str:
    return json.dumps({
        "id": rid, "actor_id": "u-1", "namespace": namespace, "memory_type": "semantic",
        "content": f"Has an appointment ({rid}).", "created_at": "2025-01-01T00:00:00Z",
        "expires_at": "2025-06-01T00:00:00Z", "owner": "u-1",
    })  # fmt: skip


def test_a_namespace_needs_its_leading_slash() -> None:
    assert namespace_problem("/users/u-1/facts") is None
    assert "must start with '/'" in (namespace_problem("users/u-1/facts") or "")
    with pytest.raises(ValueError, match="users/u-1/facts"):
        check_namespace("users/u-1/facts")


def test_import_refuses_an_unrooted_namespace_naming_record_and_field(
    home: Path, tmp_path: Path
) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text(_line("a-1", "/users/u-1/facts") + "\n" + _line("b-1", "users/u-1/facts") + "\n")
    result = _invoke("import", str(src))
    assert "b-1" in result.output and "namespace" in result.output, result.output
    assert "must start with '/'" in result.output
    store = SqliteStore(home / "memlife.db")
    try:
        assert store.get("a-1") is not None and store.get("b-1") is None
    finally:
        store.close()


def test_remember_refuses_an_unrooted_namespace_argument(home: Path) -> None:
    result = _invoke("remember", "--actor", "u-1", "--namespace", "users/u-1/facts", "Likes tea.")
    assert result.exit_code == BAD_INPUT, result.output
    assert "users/u-1/facts" in result.output and "must start with '/'" in result.output


def test_the_namespace_template_must_start_with_a_slash(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMLIFE_NAMESPACE", "users/{actor}/facts")
    with pytest.raises(SettingsError, match="MEMLIFE_NAMESPACE") as info:
        settings()
    assert info.value.exit_code == BAD_INPUT
    monkeypatch.setenv("MEMLIFE_NAMESPACE", "/teams/{actor}")
    assert settings().namespace == "/teams/{actor}"


def _legacy_record() -> MemoryRecord:
    """A row written before the rule: built past the validator, as a store reads it."""
    good = MemoryRecord(
        id="b-1", actor_id="u-1", namespace="/users/u-1/facts", memory_type=MemoryType.semantic,
        content="Has a physio appointment on May 4.", created_at=datetime(2025, 1, 1, tzinfo=UTC),
        expires_at=datetime(2025, 6, 1, tzinfo=UTC), owner="u-1",
    )  # fmt: skip
    return good.model_copy(update={"namespace": "users/u-1/facts"})


def test_a_stored_unrooted_record_stays_readable_and_the_night_names_it(
    home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    home.mkdir(parents=True, exist_ok=True)
    store = SqliteStore(home / "memlife.db")
    try:
        store.put_many([_legacy_record()])
        got = store.get("b-1")
        assert got is not None and got.namespace == "users/u-1/facts"
    finally:
        store.close()
    warn_unrooted.cache_clear()
    with caplog.at_level(logging.WARNING):
        result = _invoke("run", "--dry-run", "--engine", "local", "--now", NOW)
    assert result.exit_code == 0, result.output
    named = [r.getMessage() for r in caplog.records if "users/u-1/facts" in r.getMessage()]
    assert named and "no leading '/'" in named[0] and "hard expiry" in named[0], named


def test_a_stored_unrooted_record_still_validates_as_a_record() -> None:
    """A nightly merge, an erasure's rebuild and the AgentCore reader validate records
    built from stored ones: a row written before the rule must not become unreadable."""
    legacy = _legacy_record()
    again = MemoryRecord.model_validate(legacy.model_dump())
    assert again.namespace == "users/u-1/facts"


# -- 2. one bad CloudTrail object ------------------------------------------------------------
def _get(rid: str, namespaces: object = ("/users/u-2/preferences",)) -> dict[str, Any]:
    ns = list(namespaces) if isinstance(namespaces, tuple) else namespaces
    return {
        "eventSource": "bedrock-agentcore.amazonaws.com", "eventName": "GetMemoryRecord",
        "eventTime": "2026-11-30T00:00:00Z", "requestParameters": {"memoryRecordId": rid},
        "responseElements": {"memoryRecord": {"memoryRecordId": rid, "namespaces": ns}},
    }  # fmt: skip


def _log(path: Path, *events: dict[str, Any], truncate: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    body = gzip.compress(json.dumps({"Records": list(events)}).encode())
    path.write_bytes(body[: len(body) // 2] if truncate else body)
    return path


NAME = "111_CloudTrail_us-east-1_20261130T0000Z_x.json.gz"


def test_a_truncated_file_is_named_skipped_and_the_rest_ingested_once(tmp_path: Path) -> None:
    trail = tmp_path / "trail"
    _log(trail / "a" / NAME, _get("m-1"))
    bad = _log(trail / "a" / "222_CloudTrail_y.json.gz", _get("m-3"), truncate=True)
    ledger = AccessLedger(tmp_path / "ledger")
    report = ledger.ingest_cloudtrail(trail)
    assert (report.files, report.rows) == (1, 1)
    assert len(report.bad_files) == 1 and str(bad.resolve()) in report.bad_files[0]
    assert "EOFError" in report.bad_files[0]
    assert report.as_dict()["bad_files"] == report.bad_files
    again = ledger.ingest_cloudtrail(trail)  # the good file is not read twice; the bad one
    assert (again.files, again.already_ingested, again.rows) == (0, 1, 0)  # is named again
    assert len(again.bad_files) == 1
    ledger.flush()
    assert ledger.read().num_rows == 1


def test_an_event_of_the_wrong_shape_is_named_by_file_index_and_field(tmp_path: Path) -> None:
    trail = tmp_path / "trail"
    path = _log(trail / NAME, _get("m-1"), _get("m-2", {"k": "v"}), "not an event")
    report = AccessLedger(tmp_path / "ledger").ingest_cloudtrail(trail)
    assert (report.files, report.rows) == (1, 1)
    assert report.skipped["bad_event"] == 2
    key = str(path.resolve())
    assert report.bad_events == [
        f"{key}: Records[1].responseElements.memoryRecord.namespaces is dict, not a list of text",
        f"{key}: Records[2] is str, not an object",
    ]


@pytest.mark.parametrize(
    ("request_parameters", "field"),
    [
        ({"memoryRecordId": "m-1", "actorId": {"a": 1}}, "requestParameters.actorId"),
        ({"memoryRecordId": ["m-1"]}, "requestParameters.memoryRecordId"),
        ({"memoryRecordId": "m-1", "namespace": 7}, "requestParameters.namespace"),
        ("m-1", "requestParameters"),
    ],
)
def test_each_malformed_field_is_named(
    tmp_path: Path, request_parameters: object, field: str
) -> None:
    event = {**_get("m-1"), "requestParameters": request_parameters}
    _log(tmp_path / "trail" / NAME, event)
    report = AccessLedger(tmp_path / "ledger").ingest_cloudtrail(tmp_path / "trail")
    assert report.rows == 0 and len(report.bad_events) == 1
    assert f"Records[0].{field} " in report.bad_events[0]


def test_two_files_sharing_a_base_name_are_two_files(tmp_path: Path) -> None:
    trail = tmp_path / "trail"
    _log(trail / "a" / NAME, _get("m-1"))
    _log(trail / "b" / NAME, _get("m-2"))
    ledger = AccessLedger(tmp_path / "ledger")
    report = ledger.ingest_cloudtrail(trail)
    assert (report.files, report.already_ingested, report.rows) == (2, 0, 2)
    assert ledger.ingest_cloudtrail(trail).already_ingested == 2


def test_a_marker_written_by_base_name_still_counts(tmp_path: Path) -> None:
    """Markers before full keys were by base name: an upgrade reads nothing twice."""
    trail = tmp_path / "trail"
    _log(trail / "a" / NAME, _get("m-1"))
    ledger = AccessLedger(tmp_path / "ledger")
    ledger._mark_ingested(NAME)  # as an earlier version wrote it
    report = ledger.ingest_cloudtrail(trail)
    assert (report.files, report.already_ingested, report.rows) == (0, 1, 0)


def test_runs_and_the_ingest_command_go_on_past_a_bad_file(home: Path, tmp_path: Path) -> None:
    from memlife.run_start import load_access_stats

    trail = tmp_path / "trail"
    _log(trail / "a" / NAME, _get("m-1"))
    _log(trail / "b" / NAME, _get("m-2"))
    bad = _log(trail / "a" / "222_CloudTrail_y.json.gz", _get("m-3"), truncate=True)
    _log(trail / "a" / "333_CloudTrail_z.json.gz", _get("m-4", {"k": "v"}))
    cutoff = datetime(2026, 12, 1, tzinfo=UTC)
    dry = load_access_stats(cutoff, None, str(trail), dry_run=True)
    assert {rid for _, rid in dry} == {"m-1", "m-2"}
    applied = load_access_stats(cutoff, None, str(trail))
    assert applied == dry
    result = _invoke("ledger", "ingest-cloudtrail", str(trail))
    assert result.exit_code == 0, result.output
    assert str(bad.resolve()) in result.output and "EOFError" in result.output
    assert "0 files read (3 already ingested)" in result.output  # nothing counted twice
    assert load_access_stats(cutoff, None, str(trail)) == applied


# -- 3. MEMLIFE_EMBED_THREADS --------------------------------------------------------------
def test_embed_threads_is_bounded(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLIFE_EMBED_THREADS", "100000")
    with pytest.raises(SettingsError, match="MEMLIFE_EMBED_THREADS") as info:
        settings()
    assert info.value.exit_code == BAD_INPUT and "256" in str(info.value)
    result = _invoke("recall", "--actor", "u-1", "seat")
    assert result.exit_code == BAD_INPUT and "MEMLIFE_EMBED_THREADS" in result.output
    monkeypatch.setenv("MEMLIFE_EMBED_THREADS", "256")
    assert settings().embed_threads == 256


# -- 4. values that overflowed later ------------------------------------------------------
@pytest.mark.parametrize("value", ["inf", "1e300", "nan", "-inf"])
def test_the_lease_ttl_is_finite_and_bounded(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("MEMLIFE_LEASE_TTL_SECONDS", value)
    with pytest.raises(SettingsError, match="MEMLIFE_LEASE_TTL_SECONDS") as info:
        settings()
    assert info.value.exit_code == BAD_INPUT


@pytest.mark.parametrize(
    "var",
    ["MEMLIFE_FLOW_TIMEOUT_SECONDS", "MEMLIFE_MODEL_TIMEOUT", "MEMLIFE_RETRY_BACKOFF_SECONDS"],
)
def test_other_spans_of_seconds_are_bounded(monkeypatch: pytest.MonkeyPatch, var: str) -> None:
    monkeypatch.setenv(var, "1e300")
    with pytest.raises(SettingsError, match=var):
        settings()


def _policy(tmp_path: Path, old: str, new: str) -> Path:
    text = DEFAULT.read_text()
    assert old in text
    path = tmp_path / "policy.yaml"
    path.write_text(text.replace(old, new, 1))
    return path


@pytest.mark.parametrize(
    ("old", "new", "key"),
    [
        ("keep_answers_days: 365", "keep_answers_days: 1000000", "review.keep_answers_days"),
        ("{creation: 45, access: 30}", "{creation: 1.0e-320, access: 30}",
         "memory_types.episodic.half_life_days.creation"),
        ("{creation: 45, access: 30}", "{creation: 45, access: 1.0e+300}",
         "memory_types.episodic.half_life_days.access"),
        ("pending_delete_grace_days: 7", "pending_delete_grace_days: 1.0e+300",
         "pending_delete_grace_days"),
    ],
)  # fmt: skip
def test_spans_of_days_are_bounded(tmp_path: Path, old: str, new: str, key: str) -> None:
    with pytest.raises(PolicyError, match=f"key '{key}'"):
        load_policy(_policy(tmp_path, old, new))


def test_a_policy_at_the_bounds_runs(home: Path, tmp_path: Path) -> None:
    """The maxima are ones the night survives: a dry run at each, with records to plan."""
    text = DEFAULT.read_text().replace("keep_answers_days: 365", f"keep_answers_days: {MAX_DAYS}")
    text = text.replace("{creation: 45, access: 30}", "{creation: 0.01, access: 36500}")
    text = text.replace("pending_delete_grace_days: 7", f"pending_delete_grace_days: {MAX_DAYS}")
    policy = tmp_path / "bounds.yaml"
    policy.write_text(text)
    assert _invoke("demo", "--records", "60").exit_code == 0
    result = _invoke("run", "--dry-run", "--engine", "local", "--now", NOW, "--policy", str(policy))
    assert result.exit_code == 0, result.output


def test_quarantine_purge_bounds_its_days(home: Path) -> None:
    assert _invoke("demo", "--records", "20").exit_code == 0
    for value in ("1e308", "inf", "nan"):
        result = _invoke("quarantine", "purge", "--older-than", value, "--yes")
        assert result.exit_code == BAD_INPUT, result.output
        assert "--older-than" in result.output
    assert _invoke("quarantine", "purge", "--older-than", str(MAX_DAYS)).exit_code == 0
    assert datetime.now(UTC) - timedelta(days=MAX_DAYS) > datetime(1900, 1, 1, tzinfo=UTC)


# -- 5. YAML merge keys ---------------------------------------------------------------------
def test_a_merge_key_works_and_a_key_beside_it_overrides(tmp_path: Path) -> None:
    path = _policy(tmp_path, "    half_life_days: {creation: 45, access: 30}",
                   "    half_life_days: &hl {creation: 45, access: 30}")  # fmt: skip
    text = path.read_text().replace(
        "    half_life_days: {creation: 180, access: 90}",
        "    half_life_days: {<<: *hl, access: 90}",
    )
    path.write_text(text)
    policy = load_policy(path)
    hl = policy.memory_types[MemoryType.semantic].half_life_days
    assert (hl.creation, hl.access) == (45, 90)
    assert yaml.safe_load(text)["memory_types"]["semantic"]["half_life_days"] == {
        "creation": 45, "access": 90
    }  # fmt: skip


@pytest.mark.parametrize(
    "mapping",
    ["{<<: *hl, access: 90, access: 91}", "{<<: *hl, <<: *hl}"],
    ids=["literal repeat beside a merge", "merge written twice"],
)
def test_a_key_written_twice_beside_a_merge_is_still_refused(tmp_path: Path, mapping: str) -> None:
    path = _policy(tmp_path, "    half_life_days: {creation: 45, access: 30}",
                   "    half_life_days: &hl {creation: 45, access: 30}")  # fmt: skip
    path.write_text(
        path.read_text().replace(
            "    half_life_days: {creation: 180, access: 90}", f"    half_life_days: {mapping}"
        )  # fmt: skip
    )
    with pytest.raises(PolicyError, match="repeated"):
        load_policy(path)
