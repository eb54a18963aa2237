"""Audit 51x4 (session 51: the documentation tells the truth), held against the real CLI.

1. README "Exit codes": exit 2 is "bad usage or input: ... bad store/receipts URL, missing
   store file", and "Store, receipts URL and policy are checked before anything starts". A
   `--store` naming another application's SQLite file, or a file that is not SQLite (the
   refusal of audits 51h/51r2, which no doc named), exited 1 as `StoreError: ...`, where
   the same mistyped path to no file exits 2: a scheduler could not tell a wrong path from
   a failed run.
2. README "Exit codes": "An error is one line on stderr (`error: ...`); `MEMLIFE_DEBUG=1`
   shows the traceback". A run that met a damaged run secret (docs/receipts.md, "Where the
   secret lives": it "stops before it changes anything and names where it is kept") printed
   two chained tracebacks on stderr before that line: the failure receipt's seal read the
   same secret again and logged its warning with the traceback.
3. README "The run report page": "Every run (dry or apply) writes `report.html`". A run
   that fails (status `failure`) writes its failure receipt only, no page.
"""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

from tests.support.cli import invoke

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"


def _exit_row(code: int) -> str:
    """README's exit-code table row for ``code``."""
    section = README.read_text().split("### Exit codes", 1)[1].split("\n### ", 1)[0]
    rows = [ln for ln in section.splitlines() if ln.startswith(f"| {code} |")]
    return rows[0] if rows else ""


def _app_db(tmp_path: Path) -> Path:
    path = tmp_path / "app.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("PRAGMA user_version = 3")
    conn.commit()
    conn.close()
    return path


# -- 1. a store file that is not a memlife store is bad input, as a missing one is -----------


def test_another_applications_sqlite_file_is_refused_as_bad_input(
    home: Path, tmp_path: Path
) -> None:
    app = _app_db(tmp_path)
    before = app.read_bytes()

    code, _, err = invoke("export", "--store", f"sqlite:///{app}", "-o", str(tmp_path / "o.jsonl"))

    assert "app.db" in err and app.read_bytes() == before  # named, untouched (51h, 51r2)
    assert code == 2, err
    assert "another application" in _exit_row(code), "README's exit table does not say so"


def test_a_file_that_is_not_sqlite_is_refused_as_bad_input(home: Path, tmp_path: Path) -> None:
    notes = tmp_path / "notes.db"
    notes.write_text("shopping: milk, eggs\n" * 200)

    code, _, err = invoke("run", "--store", f"sqlite:///{notes}", "--dry-run", "--engine", "local")

    assert "notes.db" in err
    assert code == 2, err


def test_a_missing_store_file_is_bad_input(home: Path, tmp_path: Path) -> None:
    """Control: the documented case, exit 2 naming the file, before and after."""
    gone = tmp_path / "typo.db"
    code, _, err = invoke("export", "--store", f"sqlite:///{gone}", "-o", str(tmp_path / "o.jsonl"))
    assert code == 2 and "typo.db" in err and not gone.exists()


def test_a_store_is_still_opened(home: Path, tmp_path: Path) -> None:
    """Control: the refusal is only for files that are not stores."""
    assert invoke("demo", "--records", "40", "--seed", "7")[0] == 0
    code, _, err = invoke("export", "-o", str(tmp_path / "o.jsonl"))
    assert code == 0, err
    assert len((tmp_path / "o.jsonl").read_text().splitlines()) == 40


# -- 2 and 3. a damaged run secret: one line on stderr; which runs write a report page -------


def _damaged_secret(home: Path) -> None:
    """A night ran (the secret exists), then the secret was cut short (docs/receipts.md)."""
    assert invoke("demo", "--records", "60", "--seed", "7")[0] == 0
    code, _, err = invoke("run", "--engine", "local")
    assert code == 0, err
    conn = sqlite3.connect(home / "memlife.db")
    conn.execute("UPDATE secrets SET value = x'01020304' WHERE name = 'run'")
    conn.commit()
    conn.close()


def _cli(home: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    """The CLI in its own process: logging as an operator's terminal gets it (pytest's log
    capture would swallow what Python's last-resort handler prints)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLIFE_")}
    env.update(MEMLIFE_HOME=str(home), MEMLIFE_STORE=f"sqlite:///{home / 'memlife.db'}",
               MEMLIFE_RECEIPTS=f"file://{home / 'receipts'}", **extra)  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "memlife", *args],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def test_a_damaged_run_secret_is_one_error_line(home: Path) -> None:
    _damaged_secret(home)

    res = _cli(home, "run", "--engine", "local")

    assert res.returncode == 1, res.stderr
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 1 and "run secret is damaged" in errors[0]
    assert str(home / "memlife.db") in errors[0]  # names where it is kept
    assert "Traceback" not in res.stderr, res.stderr


def test_memlife_debug_still_shows_the_traceback(home: Path) -> None:
    """Control: README, "`MEMLIFE_DEBUG=1` shows the traceback"."""
    _damaged_secret(home)
    res = _cli(home, "run", "--engine", "local", MEMLIFE_DEBUG="1")
    assert res.returncode != 0 and "Traceback" in res.stderr
    assert "JournalStateError" in res.stderr


def _page_paragraph() -> str:
    text = README.read_text()
    return " ".join(text.split("### The run report page", 1)[1].split("\n### ", 1)[0].split())


def test_readme_says_which_runs_write_a_report_page(home: Path) -> None:
    """A failed run has a failure receipt and no page: README must not say it has one."""
    _damaged_secret(home)
    code, _, _ = invoke("run", "--engine", "local")
    assert code == 1
    folders = sorted((home / "receipts").rglob("runs/*/*/*/*-apply-*"))
    (failed,) = [f for f in folders if '"failure"' in (f / "receipt.json").read_text()]

    assert not (failed / "report.html").exists()  # the code: a failure writes no page
    assert re.search(r"a run that fails[^.]*no page", _page_paragraph(), re.I), _page_paragraph()


def test_a_finished_run_writes_its_page_beside_its_receipt(home: Path) -> None:
    """Control: what README says of a finished run holds (`report page:` printed)."""
    assert invoke("demo", "--records", "60", "--seed", "7")[0] == 0
    code, out, err = invoke("run", "--engine", "local", "--dry-run")
    assert code == 0, err
    (page,) = (home / "receipts").rglob("runs/*/*/*/*-dry-*/report.html")
    assert f"report page: {page}" in " ".join((out + err).split())
    assert (page.parent / "receipt.json").exists()
