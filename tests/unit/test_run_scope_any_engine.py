"""A run started through Prefect is checked as the CLI checks one (session 29 operator review
on a real Prefect server): a deployment run on a mistyped store created an empty file and
reported success with 0 records, every night; an unrooted or typo'd namespace glob was a
quiet, clean night with no word; a run refused before it started (a bad policy path)
emitted no memlife.run.* event, so no automation alerted. The pipeline checks the store
and the scope itself now, and tells a refusal to its caller (the flow emits the event)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from memlife.errors import InputError
from memlife.pipeline import RunConfig, run, run_local
from memlife.stores.sqlite import SqliteStore
from tests.support.records import good


def _store(tmp_path: Path) -> str:
    with SqliteStore(tmp_path / "s.db") as store:
        from memlife.model import MemoryRecord

        store.put_many([MemoryRecord.model_validate(good("m-1"))])
    return f"sqlite:///{tmp_path / 's.db'}"


def test_a_missing_store_is_refused_and_never_created(home: Path, tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "missing.db"
    refused: list[str] = []
    with pytest.raises(InputError, match="no such file"):
        run(RunConfig(dry_run=True, store=f"sqlite:///{missing}"),
            on_refused=lambda c, e: refused.append(type(e).__name__))  # fmt: skip
    assert not missing.exists() and not missing.parent.exists()
    assert refused == ["InputError"]


def test_an_unrooted_glob_is_refused(home: Path, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="users/\\*/facts"):
        run_local(RunConfig(dry_run=True, store=_store(tmp_path), namespaces=("users/*/facts",)))


def test_a_scope_matching_nothing_is_named_in_the_log_and_the_receipt(
    home: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        summary = run_local(RunConfig(dry_run=False, store=_store(tmp_path),
                                      namespaces=("/user/*/facts",)))  # fmt: skip
    assert "scope_unmatched" in caplog.text and "/user/*/facts" in caplog.text
    receipt = json.loads(Path(summary.receipt).read_text())
    assert receipt["other_counts"]["scope_unmatched:--namespace=/user/*/facts"] == 1


def test_the_refused_event_carries_no_message() -> None:
    pytest.importorskip("prefect")
    from flows.events import refused_event

    err = InputError("store sqlite:////secret/path/Alice-allergies.db: no such file")
    name, resource, payload = refused_event(RunConfig(dry_run=False), err)
    assert name == "memlife.run.failure" and payload["error"] == "InputError"
    assert "Alice" not in json.dumps([resource, payload])
