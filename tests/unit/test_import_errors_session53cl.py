"""Audit 53cl: memory text in the import's refusals of a bad line.

An import line is refused by line, record id and field, and the refusal is printed on
stderr (``invalid line N: ...``), listed by ``import --json`` and kept by whatever log
collects the command's output. The field was the line's own key, copied as it was, and
the id the line's own ``id`` whatever it held. A line whose text landed where a key or the
id goes (a converter that shifted its columns, a hand edit, a tool that writes the fact
as a key) had that text printed back: ``field 'Diagnosed with hepatitis C in March':
Extra inputs are not permitted``, also for a key under ``provenance``, a key written twice,
a key holding a number past the digit limit or a lone surrogate, and a 300-character
``id`` refused for its length. The erasures file (``import --erasures``) named an unknown
key the same way. Evaluation sets and a model's answer already name such a key by its
place (``<key>``, sessions 20 and 42); a key that is a plain name (``colour``,
``metadata.turn.1.n``) is still named, so an operator still sees what to fix.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from memlife.erasure_export import parse_erasures
from memlife.errors import InputError
from memlife.importer import import_file
from memlife.stores.sqlite import SqliteStore
from tests.support.cli import invoke
from tests.support.records import good

CANARY = "Diagnosed with hepatitis QZX53CL in March"
HUGE = "9" * (sys.get_int_max_str_digits() + 1)


def _with(rid: str, text: str) -> str:
    """A good line with raw JSON ``text`` spliced in as one more member."""
    return json.dumps(good(rid))[:-1] + ", " + text + "}"


def _bad_lines() -> list[str]:
    key = json.dumps(CANARY)
    prov = good("m-prov")
    prov["provenance"] = {**prov["provenance"], CANARY: True}
    return [
        json.dumps(good("m-ok1")),
        _with("m-key", f"{key}: true"),  # the text as a key
        json.dumps(prov),  # ... under provenance
        _with("m-twice", f"{key}: 1, {key}: 2"),  # ... written twice
        _with("m-digits", f"{key}: {HUGE}"),  # ... holding a number no field takes
        _with("m-surrogate", f'"{CANARY} \\ud800": 1'),  # ... holding a lone surrogate
        json.dumps(good(", ".join([CANARY] * 8))),  # the text as the id: over 256 characters
        json.dumps(good("m-ok2")),
    ]


def _import(tmp_path: Path, **kw: Any) -> list[Any]:
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(_bad_lines()) + "\n", encoding="utf-8")
    with SqliteStore(tmp_path / "s.db") as store:
        report = import_file(store, src, **kw)
        ids = {r[0] for r in store.connection.execute("SELECT id FROM records")}
    assert ids == {"m-ok1", "m-ok2"}  # each bad line refused, the rest imported
    return report.invalid


@pytest.mark.parametrize(
    "kw", [{"workers": 0}, {"workers": 1}, {"update": True}], ids=["rows", "turns", "update"]
)
def test_a_refused_line_is_named_by_line_and_place_never_its_text(
    tmp_path: Path, kw: dict[str, Any]
) -> None:
    invalid = _import(tmp_path, **kw)
    assert [e.line for e in invalid] == [2, 3, 4, 5, 6, 7]  # every bad line, by number
    for e in invalid:
        said = json.dumps(e.as_dict()) + str(e)
        assert "QZX53CL" not in said, said
    assert {e.field for e in invalid} >= {"<key>", "provenance.<key>", "id"}


def test_the_cli_prints_no_text_of_a_refused_line(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(_bad_lines()) + "\n", encoding="utf-8")
    store = f"sqlite:///{tmp_path / 's.db'}"
    code, out, err = invoke("import", str(src), "--store", store, "--json")
    assert code == 1 and json.loads(out)["imported"] == 2
    assert "QZX53CL" not in out + err


def test_an_erasures_line_names_an_unknown_key_by_its_place() -> None:
    line = {"kind": "tombstone", "actor_id": "u-1", "record_id": "m-1",
            "content_sha256": "a" * 64, CANARY: True}  # fmt: skip
    with pytest.raises(InputError) as info:
        parse_erasures([json.dumps(line)])
    assert "QZX53CL" not in str(info.value)
    assert "erasures line 1: field '<key>'" in str(info.value)


def test_control_a_plain_unknown_key_and_a_short_id_are_still_named(tmp_path: Path) -> None:
    """What an operator fixes by: a key that is a plain name, the id of a line refused for
    another field, a nested place, all as before."""
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join([
        json.dumps(good("m-colour", colour="blue")),
        json.dumps(good("m-conf", confidence=2)),
        _with("m-extra", f'"metadata": {{"turn": [1, {{"n": {HUGE}}}]}}'),
        json.dumps(good("m-ok")),
    ]) + "\n", encoding="utf-8")  # fmt: skip
    with SqliteStore(tmp_path / "s.db") as store:
        report = import_file(store, src)
    assert [(e.line, e.record_id, e.field) for e in report.invalid] == [
        (1, "m-colour", "colour"),
        (2, "m-conf", "confidence"),
        (3, "m-extra", "metadata.turn.1.n"),
    ]
    line = {"kind": "tombstone", "actor_id": "u-1", "record_id": "m-1",
            "content_sha256": "a" * 64, "colour": "blue"}  # fmt: skip
    with pytest.raises(InputError, match="erasures line 1: field 'colour'"):
        parse_erasures([json.dumps(line)])
