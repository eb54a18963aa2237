"""Audit 51iii (session 51): an evaluation set a careless operator saves in another encoding,
or one nested past the parser's depth, is refused naming the file, as any bad set is.

``load_cases`` caught ``OSError`` and YAML/JSON syntax errors only: a set saved as UTF-16
(Windows PowerShell's ``>``, Notepad's "Unicode") or Latin-1 escaped as a bare
``UnicodeDecodeError``, and a set nested past the parser's depth as a bare
``RecursionError``, naming neither the file nor where it came from. The library and the
Prefect flow (``pipeline.run`` loads the set before it starts) were refused with that bare
error; the CLI's last-resort handler printed "error: 'utf-8' codec can't decode byte 0xff
in position 0" (no flag, no file). The policy loader says "not UTF-8 text" since session 20.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memlife.evalset import EvalSetError, load_cases
from tests.support.cli import invoke
from tests.support.gate import FACTS, store_at

CASES = (
    "cases:\n- id: c1\n  query: Does the user still drink café au lait?\n"
    "  actor_id: u-1\n  must_retrieve: [m-1]\n"
)
LINE = '{"id": "c1", "query": "q", "actor_id": "u-1", "must_retrieve": ["m-1"]}\n'


def _bad_sets(tmp_path: Path) -> dict[str, Path]:
    files = {
        "utf-16.yaml": CASES.encode("utf-16"),
        "latin-1.yaml": CASES.encode("latin-1"),
        "utf-16.jsonl": LINE.encode("utf-16"),
        "deep.yaml": ("cases: " + "[" * 100_000 + "]" * 100_000 + "\n").encode(),
        "deep.jsonl": ("[" * 100_000 + "]" * 100_000 + "\n").encode(),
    }
    out = {}
    for name, body in files.items():
        (tmp_path / name).write_bytes(body)
        out[name] = tmp_path / name
    return out


def test_a_set_in_another_encoding_or_nested_too_deep_is_an_evalset_error(tmp_path: Path) -> None:
    for name, path in _bad_sets(tmp_path).items():
        with pytest.raises(EvalSetError) as err:
            load_cases(str(path))
        assert str(path) in str(err.value), name
        assert "café" not in str(err.value)  # the set's text is never quoted


def test_run_refuses_a_utf16_set_before_it_starts(home: Path, tmp_path: Path) -> None:
    home.mkdir(exist_ok=True)
    store = store_at(home)
    store.put_many(FACTS)
    store.close()
    path = _bad_sets(tmp_path)["utf-16.yaml"]
    code, out, err = invoke("run", "--engine", "local", "--dry-run", "--eval-cases", str(path))
    assert code == 2 and "--eval-cases" in err and "not UTF-8" in err, (code, out, err)
    assert path.name in err.replace("\n", ""), err
    assert not (home / "receipts").exists()  # refused before any manifest


def test_a_set_with_a_utf8_bom_still_loads(tmp_path: Path) -> None:
    """Control: a UTF-8 set with a byte-order mark (Notepad's "UTF-8 with BOM") loads."""
    path = tmp_path / "bom.yaml"
    path.write_text("\ufeff" + CASES, encoding="utf-8")
    assert [c.id for c in load_cases(str(path))] == ["c1"]
