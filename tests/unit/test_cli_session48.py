"""Session 48 (audit 48iv): the operator's CLI as a careless operator (and a script) drives it: a path
that is a folder where a file is meant, a Prefect API URL carrying a password, ids that are
not valid UTF-8 (a latin-1 byte in a shell argument arrives as a lone surrogate).

README "Exit codes": 2 is bad usage or input (bad store URL, invalid policy, ...) and is
given before anything starts; 1 is a command that failed. Errors are one line on stderr."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from memlife.model import MemoryRecord, MemoryType, Status
from memlife.stores.sqlite import SqliteStore
from tests.support.cli import invoke

NOW = "2026-12-01T02:00:00Z"
NOT_UTF8 = "m-caf\udce9"  # `memlife ... m-caf$'\xe9'`: Python's surrogateescape of byte 0xE9


def _seed(home: Path, *ids: str, status: Status = Status.active) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    with SqliteStore(home / "memlife.db") as store:
        store.put_many([
            MemoryRecord(id=rid, actor_id="u-1", namespace="/users/u-1/facts",
                         memory_type=MemoryType.semantic, content=f"Has appointment {n}.",
                         created_at=datetime(2025, 1, 1, tzinfo=UTC), owner="u-1",
                         status=status, status_changed_at=datetime(2025, 1, 2, tzinfo=UTC))
            for n, rid in enumerate(ids)
        ])  # fmt: skip
    return home / "memlife.db"


def _runs(home: Path) -> list[Path]:
    return sorted((home / "receipts").glob("runs/*/*/*/*"))


def test_the_engine_line_never_prints_the_prefect_api_password(home: Path) -> None:
    """The operator's Prefect API sits behind a proxy with basic auth in its URL. `memlife
    run` names the API it will use on stderr (cron logs): the password must be masked, as
    `config show` masks one in ANTHROPIC_BASE_URL (session 37). Here the run is refused
    right after that line (a cutoff 100 years back), so no server is needed."""
    _seed(home, "m-1")
    code, _, err = invoke(
        "run", "--now", "1900-01-03T00:00:00Z",
        env={"PREFECT_API_URL": "http://ana:s3cret-pw@127.0.0.1:9/api"},
    )  # fmt: skip
    assert code == 2, err
    assert "engine: prefect" in err and "127.0.0.1:9" in err
    assert "s3cret-pw" not in err


@pytest.mark.parametrize(
    "args",
    [
        ("run", "--dry-run", "--engine", "local", "--now", NOW),
        ("hold", "place", "--id", "m-1"),
        ("erase", "--actor", "u-1", "--id", "m-1", "--yes"),
    ],
)
def test_a_policy_that_is_a_folder_is_bad_input(home: Path, tmp_path: Path, args: tuple) -> None:
    """`--policy policies/` (the folder, tab completion stopped early): an invalid policy
    is exit 2 with one line naming the path (README), and nothing is held or erased."""
    _seed(home, "m-1")
    folder = tmp_path / "policies"
    folder.mkdir()
    code, _, err = invoke(*args, "--policy", str(folder))
    assert code == 2, err
    assert str(folder) in err and "IsADirectoryError" not in err
    with SqliteStore(home / "memlife.db") as store:
        record = store.get("m-1")
    assert record is not None and record.retention_class.value == "standard"


@pytest.mark.parametrize(
    "args", [("demo", "-n", "3"), ("remember", "Likes tea.", "--actor", "u-1")]
)
def test_a_store_url_naming_a_folder_is_bad_input(home: Path, tmp_path: Path, args: tuple) -> None:
    """`--store sqlite:///$HOME/memlife` where memlife is a folder, on a command that may
    create its store: a bad store URL is exit 2 naming the flag and the path, not a bare
    "OperationalError: unable to open database file" (exit 1, no path)."""
    folder = tmp_path / "a-folder"
    folder.mkdir()
    code, _, err = invoke(*args, "--store", f"sqlite:///{folder}")
    assert code == 2, err
    assert str(folder) in err and "OperationalError" not in err


def test_export_to_a_folder_is_refused_before_the_store_is_read(home: Path, tmp_path: Path) -> None:
    """`memlife export -o backups/` (a folder): refused as bad input before anything is read
    or written, as --erasures and --access already are (dir_okay=False); it wrote the whole
    store to a hidden temporary file, then failed on the rename (exit 1, the message naming
    that temporary file)."""
    _seed(home, "m-1")
    out = tmp_path / "backups"
    out.mkdir()
    code, stdout, err = invoke("export", "-o", str(out))
    assert code == 2, err
    assert stdout == "" and ".tmp" not in err and list(out.iterdir()) == []
    assert list(tmp_path.glob(".backups.*")) == []


def test_eval_init_to_a_folder_is_refused_and_force_is_not_offered(home: Path, tmp_path: Path):
    """`memlife eval init -o eval/` (a folder): the refusal said "exists (use --force to
    overwrite)", and `--force` then failed with IsADirectoryError (exit 1). A folder is bad
    input with or without --force (exit 2), and no advice to force it."""
    _seed(home, "m-1")
    out = tmp_path / "eval"
    out.mkdir()
    code, _, err = invoke("eval", "init", "-o", str(out))
    assert code == 2 and "--force" not in err, err
    code, _, err = invoke("eval", "init", "-o", str(out), "--force")
    assert code == 2 and "IsADirectoryError" not in err, err


def test_restore_of_an_id_that_is_not_utf8_starts_no_run(home: Path) -> None:
    """A script passes an id read from a latin-1 file to `quarantine restore`. It is bad
    input (exit 2), and bad input starts nothing: the restore wrote its run's manifest,
    then failed on the id, and left a run `receipts list` shows `incomplete` and `receipts
    verify` fails (RUN_RECEIPT_MISSING) until some later writer seals it ABANDONED."""
    _seed(home, "q-1", status=Status.quarantined)
    code, _, err = invoke("quarantine", "restore", "q-1", NOT_UTF8)
    assert code == 2, err
    assert _runs(home) == []
    with SqliteStore(home / "memlife.db") as store:
        record = store.get("q-1")
    assert record is not None and record.status is Status.quarantined


def test_history_of_an_id_that_is_not_utf8_is_bad_input(home: Path) -> None:
    """`receipts history` of an id that is not valid UTF-8, once the receipts hold an
    operations dataset: pyarrow's compare raised "TypeError: Got unexpected argument type
    <class 'str'> for compute function" (exit 1, naming nothing). Bad input: exit 2, one
    line naming the argument."""
    _seed(home, "m-1")
    code, _, err = invoke("hold", "place", "--id", "m-1")
    assert code == 0 and _runs(home), err
    code, out, err = invoke("receipts", "history", NOT_UTF8, "--json")
    assert code == 2 and out == "", err
    assert "TypeError" not in err and "UTF-8" in err


def test_a_reversed_day_range_is_refused_not_read_as_no_evidence(home: Path) -> None:
    """A reviewer swaps `--since` and `--until`. The range holds no day, so nothing can
    match: `receipts history` said "no operation on m-1 in the receipts" (exit 1), read as
    "never held, never deleted", and `receipts list` printed an empty table (exit 0), read
    as "no run". As `review list` refuses a filter that can match nothing (session 30),
    the range is refused naming both flags (exit 2)."""
    _seed(home, "m-1")
    code, _, err = invoke("hold", "place", "--id", "m-1")
    assert code == 0, err
    swapped = ("--since", "2999-01-01", "--until", "2000-01-01")
    code, out, err = invoke("receipts", "history", "m-1", *swapped)
    assert code == 2 and "no operation" not in err, err
    assert "--since" in err and "--until" in err
    code, out, err = invoke("receipts", "list", *swapped, "--json")
    assert code == 2 and out == "", (out, err)
