"""Audit 52m2 (session 52: a mutation pass over this session's fixes): two findings.

1. ``export_files.Staged`` (audit 52i) creates its temporary file with the replaced file's
   mode *before* writing into it, then opens it again by name to write. A replaced file
   that is read-only (``chmod 444``: a backup kept read-only, a reviewed evaluation set)
   gives a temporary file its owner cannot open for writing: ``memlife export -o
   backup.jsonl`` and ``memlife eval init --force`` failed with a bare PermissionError
   naming a hidden ``.backup.jsonl.xxxx.tmp`` (left behind, 0444), where before 52i the
   file was replaced (its mode restored by the rename, as ``mv``/``sed -i`` do). Root is
   not refused by file modes, so the writer runs in a child process as an unprivileged
   user when the tests run as root.

2. ``journal/dynamodb_items.refuse_too_large`` (audit 52ii) let an operation be planned
   right up to DynamoDB's item limit, but every later state adds attributes to the same
   item (``outcome``, ``last_error``, ``next_retry_at``, ``moved_by``...). An operation the
   check accepted within those few hundred bytes of the limit was planned, then its
   first transition (the store already changed, or a throttled write failing) was refused
   by DynamoDB as a bare ClientError: the night stopped, and the operation, still
   PLANNED, was run again and stopped every later night. moto enforces 405,000 bytes (its
   comment: the real limit lies between 409 and 410 KB); the tests set ``ITEM_MAX`` to
   the limit the backend under test enforces.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import memlife.journal.dynamodb_items as items
from memlife.export_files import Staged
from memlife.journal import JournalStateError, Mover, OpState, Outcome
from memlife.journal.dynamodb import DynamoJournal
from memlife.state.dynamodb import DynamoState
from tests.support.aws_state import aws_state
from tests.unit.test_journal_item_size_session52ii import update_op

NOBODY = 65534


# -- 1. Staged over a read-only file ---------------------------------------------------------
@pytest.fixture()
def shared_dir() -> Iterator[Path]:
    """A folder an unprivileged user owns (pytest's tmp_path is root's 0700 when root)."""
    d = Path(tempfile.mkdtemp(prefix="memlife-52m2-"))
    if os.geteuid() == 0:
        os.chown(d, NOBODY, NOBODY)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _own(path: Path) -> None:
    if os.geteuid() == 0:
        os.chown(path, NOBODY, NOBODY)


def _as_a_user(fn: Callable[[], None]) -> str | None:
    """Run ``fn`` as an unprivileged user (in a child when we are root); its error, or None."""
    if os.geteuid() != 0:
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - the error is what the test reads
            return f"{type(exc).__name__}: {exc}"
        return None
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(r)
        msg = b""
        try:
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            fn()
        except BaseException as exc:  # noqa: BLE001
            msg = f"{type(exc).__name__}: {exc}".encode()
        os.write(w, msg)
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        out = f.read().decode()
    os.waitpid(pid, 0)
    return out or None


def _export(place: Path, text: str) -> Callable[[], None]:
    def write() -> None:
        staged = Staged()
        try:
            staged.open(place).write(text)
            staged.commit()
        finally:
            staged.discard()

    return write


def test_a_read_only_output_is_replaced_and_stays_read_only(shared_dir: Path) -> None:
    place = shared_dir / "backup.jsonl"
    place.write_text("old\n")
    _own(place)
    place.chmod(0o444)
    error = _as_a_user(_export(place, "new\n"))
    assert error is None
    assert place.read_text() == "new\n"
    assert stat.S_IMODE(place.stat().st_mode) == 0o444  # the mode it had, as before
    assert sorted(p.name for p in shared_dir.iterdir()) == ["backup.jsonl"]  # no temporary


def test_control_a_private_output_stays_private_as_a_user(shared_dir: Path) -> None:
    place = shared_dir / "backup.jsonl"
    place.write_text("old\n")
    _own(place)
    place.chmod(0o600)
    assert _as_a_user(_export(place, "new\n")) is None
    assert place.read_text() == "new\n"
    assert stat.S_IMODE(place.stat().st_mode) == 0o600


def test_control_the_staged_file_is_never_readable_by_others(tmp_path: Path) -> None:
    """A private file's staged copy is private from its creation (52i's guarantee)."""
    place = tmp_path / "backup.jsonl"
    place.write_text("old\n")
    place.chmod(0o600)
    staged = Staged()
    try:
        f = staged.open(place)
        (tmp,) = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
        assert stat.S_IMODE(tmp.stat().st_mode) & 0o077 == 0
        f.write("new\n")
        staged.commit()
    finally:
        staged.discard()
    assert stat.S_IMODE(place.stat().st_mode) == 0o600


# -- 2. an operation at the item limit, then its transitions -------------------------------------
MOTO_ITEM_MAX = 405_000  # moto's LimitedSizeDict bound (DynamoDB's own is about 409,600)


@pytest.fixture()
def state(monkeypatch: pytest.MonkeyPatch) -> Iterator[DynamoState]:
    monkeypatch.setattr(items, "ITEM_MAX", MOTO_ITEM_MAX)
    with aws_state("inprocess") as (_, st_):
        yield st_


def _op_of(size: int) -> object:
    now = datetime.now(UTC).isoformat()
    base = items.item_bytes(items.to_item(update_op("m-1", "x"), now))
    return update_op("m-1", "x" * (size - base + 1))


def _through_a_failure_and_back(journal: DynamoJournal, op_id: str) -> None:
    """A throttled write (FAILED, due again), then its retry applied and receipted."""
    later = datetime.now(UTC) + timedelta(minutes=5)
    mover = Mover("20261101T000000Z-apply-0123456789", 3)
    journal.transition(op_id, OpState.FAILED, outcome=Outcome.failed, error="THROTTLED",
                       next_retry_at=later, by=mover)  # fmt: skip
    journal.transition(op_id, OpState.APPLIED, outcome=Outcome.already_absent, by=mover)
    journal.transition(op_id, OpState.RECEIPTED, by=mover)


def test_an_operation_the_size_check_accepts_can_go_through_its_states(
    state: DynamoState,
) -> None:
    journal = DynamoJournal(state)
    op = _op_of(MOTO_ITEM_MAX)  # the largest the check accepts
    try:
        (planned,) = journal.plan([op])  # type: ignore[list-item]
    except JournalStateError as exc:  # refused before anything was written: also sound
        assert "m-1" in str(exc) and "payload" in str(exc)
        assert journal.get(op.operation_id) is None  # type: ignore[attr-defined]
        return
    _through_a_failure_and_back(journal, planned.operation_id)  # never a bare ClientError
    got = journal.get(planned.operation_id)
    assert got is not None and got.state is OpState.RECEIPTED


def test_control_a_large_operation_well_under_the_limit_goes_through_its_states(
    state: DynamoState,
) -> None:
    journal = DynamoJournal(state)
    (planned,) = journal.plan([_op_of(MOTO_ITEM_MAX - 4096)])  # type: ignore[list-item]
    _through_a_failure_and_back(journal, planned.operation_id)
    got = journal.get(planned.operation_id)
    assert got is not None and got.state is OpState.RECEIPTED and got.payload is None
