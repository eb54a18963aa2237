"""Audit 53r2: 53cl's "a 300-character id is not echoed", on the paths that refuse a line
before the model validates it.

53cl left a line's ``id`` out of the refusal only where the model's first error is the id
itself. A line whose text landed in ``id`` (a converter one column off: over 256
characters, so no record can carry it) and that is refused first for something else (a
key written twice, a lone surrogate, a number past the digit limit, an actor id with a
trailing space or not in NFC) still printed that text as ``record <id>`` on stderr and in
``import --json``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from memlife.errors import RecordError
from memlife.importer import import_file
from memlife.model import parse_record_line
from memlife.stores.sqlite import SqliteStore
from tests.support.records import good

CANARY = "Diagnosed with hepatitis QZX53R2 in March"
LONG_ID = ", ".join([CANARY] * 8)  # over 256 characters: no record's id
HUGE = "9" * (sys.get_int_max_str_digits() + 1)


def _with(rid: str, text: str, **kw: object) -> str:
    return json.dumps(good(rid, **kw))[:-1] + ", " + text + "}"


LINES = {
    "twice": _with(LONG_ID, '"colour": 1, "colour": 2'),
    "surrogate": _with(LONG_ID, '"colour": "\\ud800"'),
    "digits": _with(LONG_ID, f'"colour": {HUGE}'),
    "actor_space": json.dumps(good(LONG_ID, actor_id="u-1 ")),
    "actor_nfc": json.dumps(good(LONG_ID, actor_id="jose\u0301")),
}


@pytest.mark.parametrize("name", list(LINES))
def test_an_overlong_id_is_never_echoed_whatever_refuses_the_line(name: str) -> None:
    with pytest.raises(RecordError) as info:
        parse_record_line(LINES[name], 4)
    said = str(info.value) + json.dumps(info.value.as_dict())
    assert "QZX53R2" not in said, said
    assert info.value.record_id is None and said.startswith("line 4: record <no id>")


def test_the_import_report_names_no_overlong_id(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join([*LINES.values(), json.dumps(good("m-ok"))]) + "\n", "utf-8")
    with SqliteStore(tmp_path / "s.db") as store:
        report = import_file(store, src)
    assert [e.line for e in report.invalid] == [1, 2, 3, 4, 5]
    assert not any("QZX53R2" in str(e) for e in report.invalid)


def test_control_a_short_id_is_still_named_whatever_refuses_the_line() -> None:
    """What an operator finds the line by: an id a record can carry, as before."""
    for text in (_with("m-twice", '"colour": 1, "colour": 2'), _with("m-sur", '"c": "\\ud800"'),
                 json.dumps(good("m-actor", actor_id="u-1 "))):  # fmt: skip
        with pytest.raises(RecordError) as info:
            parse_record_line(text, 1)
        assert info.value.record_id in {"m-twice", "m-sur", "m-actor"}
