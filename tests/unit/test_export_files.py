"""Export's files (memlife/export_files.py): refused where they would destroy what is read
or each other; written whole or not at all."""

from __future__ import annotations

from pathlib import Path

from memlife.stores.sqlite import SqliteStore
from tests.support.cli import invoke
from tests.support.gate import rec


def _store(home: Path) -> Path:
    db = home / "store.db"
    with SqliteStore(db) as s:
        s.put_many([rec("m-1", "facts", "Drinks green tea.")])
    return db


def test_the_refusals_name_the_flags_and_write_nothing(home: Path) -> None:
    db = _store(home)
    code, _, err = invoke("export", "--store", f"sqlite:///{db}", "--erasures", f"{db}-wal")
    assert code == 2 and "--erasures" in err and "store's own file" in err
    out = home / "out.jsonl"
    code, _, err = invoke("export", "--store", f"sqlite:///{db}", "-o", str(out),
                          "--access", str(home / "." / "out.jsonl"))  # fmt: skip
    assert code == 2 and "--output and --access name one file" in err
    assert not out.exists() and sorted(p.name for p in home.iterdir() if "out" in p.name) == []


def test_an_export_failing_part_way_leaves_the_files_it_would_replace(home: Path) -> None:
    """The access file cannot be written (its folder is missing): the records file already
    there keeps its old text, and no temporary file is left beside it."""
    db = _store(home)
    out = home / "records.jsonl"
    out.write_text("the previous export\n", encoding="utf-8")
    code, _, _ = invoke("export", "--store", f"sqlite:///{db}", "-o", str(out),
                        "--access", str(home / "missing" / "reads.parquet"))  # fmt: skip
    assert code != 0
    assert out.read_text(encoding="utf-8") == "the previous export\n"
    assert sorted(p.name for p in home.iterdir() if p.name.startswith(".")) == []


def test_an_export_writes_each_file_in_its_place(home: Path) -> None:
    db = _store(home)
    out, erased = home / "records.jsonl", home / "erasures.jsonl"
    code, _, err = invoke("export", "--store", f"sqlite:///{db}", "-o", str(out),
                          "--erasures", str(erased))  # fmt: skip
    assert code == 0, err
    assert '"m-1"' in out.read_text(encoding="utf-8") and erased.exists()
