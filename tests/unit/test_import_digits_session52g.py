"""Audit 52g: an integer written with more digits than Python converts (4,300 by default,
``sys.get_int_max_str_digits``) on one line of an import file.

The fast path refused such a line (its JSON parser reads big integers; no field takes one)
and handed it to the checked path, whose ``json.loads`` raised a bare ``ValueError`` ("Exceeds
the limit (4300 digits) for integer string conversion") that is not a ``RecordError``. So one
damaged or hostile line stopped the whole import on every path: in this process the CLI
printed the codec's message, naming no line or field; through the worker processes the
import stopped with ``ImportWorkerError`` saying "running the same import again finishes
it", which it never does (the same line stops it again); ``--update`` likewise. The lines
after it were never imported. The erasures file already refused such a number by line
(``erasure_export.parse_erasures``); the record lines did not.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from memlife.errors import RecordError
from memlife.importer import import_file
from memlife.model import parse_record_line
from memlife.stores.sqlite import SqliteStore
from tests.support.records import good

HUGE = "9" * (sys.get_int_max_str_digits() + 1)  # one digit past what int() converts


def _with(rid: str, text: str) -> str:
    """A good line with ``text`` spliced in as one more member (raw JSON: a number
    json.dumps cannot write)."""
    return json.dumps(good(rid))[:-1] + ", " + text + "}"


def _lines() -> list[str]:
    return [
        json.dumps(good("m-ok1")),
        json.dumps(good("m-count")).replace('"access_count": 0', f'"access_count": {HUGE}'),
        json.dumps(good("m-conf")).replace('"confidence": 0.9', f'"confidence": -{HUGE}'),
        json.dumps(good("m-sup")).replace('"supersedes": []', f'"supersedes": ["m-1", {HUGE}]'),
        _with("m-extra", f'"metadata": {{"turn": [1, {{"n": {HUGE}}}]}}'),
        json.dumps(good("m-ok2")),
    ]


EXPECTED = {
    (2, "m-count", "access_count"),
    (3, "m-conf", "confidence"),
    (4, "m-sup", "provenance.supersedes.1"),
    (5, "m-extra", "metadata.turn.1.n"),
}


@pytest.mark.parametrize(
    "kw", [{"workers": 0}, {"workers": 1}, {"update": True}], ids=["rows", "turns", "update"]
)
def test_a_number_past_the_digit_limit_is_a_line_error_and_the_rest_is_imported(
    home: Path, tmp_path: Path, kw: dict[str, Any]
) -> None:
    src = tmp_path / "digits.jsonl"
    src.write_text("\n".join(_lines()) + "\n", encoding="utf-8")
    with SqliteStore(tmp_path / "s.db") as store:
        report = import_file(store, src, **kw)
        ids = {r[0] for r in store.connection.execute("SELECT id FROM records")}
    assert ids == {"m-ok1", "m-ok2"}
    assert {(e.line, e.record_id, e.field) for e in report.invalid} == EXPECTED
    assert all("digits" in e.reason for e in report.invalid)
    assert all(HUGE[:50] not in e.reason for e in report.invalid)  # never echoed


@pytest.mark.parametrize(
    "text",
    [HUGE, f"[{HUGE}]", "{" + f'"id": "m-1", "access_count": {HUGE}' + "}"],
    ids=["bare", "array", "object"],
)
def test_the_checked_path_refuses_such_a_line_as_a_record_error(text: str) -> None:
    with pytest.raises(RecordError) as got:
        parse_record_line(text, 7)
    assert got.value.line == 7 and "digits" in got.value.reason


def test_control_a_long_number_within_the_limit_is_named_by_its_field(
    home: Path, tmp_path: Path
) -> None:
    """31 digits (a number int() converts): refused by field on the same paths, as ever."""
    src = tmp_path / "long.jsonl"
    src.write_text(
        "\n".join(
            [
                json.dumps(good("m-ok1")),
                json.dumps(good("m-count")).replace(
                    '"access_count": 0', '"access_count": 1' + "0" * 30
                ),
                json.dumps(good("m-ok2")),
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    with SqliteStore(tmp_path / "s.db") as store:
        report = import_file(store, src, workers=0)
    assert report.imported == 2
    assert [(e.line, e.record_id, e.field) for e in report.invalid] == [
        (2, "m-count", "access_count")
    ]
