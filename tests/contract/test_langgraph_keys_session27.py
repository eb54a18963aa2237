"""The LangGraph adapter, session 27: an item key is bounded like the record's own
identifiers (256 characters, as ``MemoryRecord.id``, ``actor_id``, ``subject`` and
``owner``), refused with its length and never quoted; and a value that would not read back
as written (a non-string dict key, a tuple, a set, bytes, NaN or infinity) is refused
with what is wrong, rather than stored as something else.

LangGraph's InMemoryStore keeps the Python objects as given (``{1: "a"}`` reads back with
the int key, a set as a set): a JSON store cannot, so memlife refuses what JSON cannot
carry exactly, as before for sets and bytes (then a bare ``TypeError``), and now for the
values it silently changed (``{1: "a"}`` read back as ``{"1": "a"}``)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph.store.base")

from langgraph.store.base import PutOp  # noqa: E402
from langgraph.store.memory import InMemoryStore  # noqa: E402

from memlife import Memory  # noqa: E402
from memlife.errors import InputError  # noqa: E402
from memlife.integrations.langgraph import KEY_MAX_CHARS, MemlifeStore  # noqa: E402

NS = ("users", "u1", "prefs")


@pytest.fixture(name="store")
def _store(tmp_path: Path) -> MemlifeStore:
    return MemlifeStore(Memory(f"sqlite:///{tmp_path / 'lg.db'}", ledger=tmp_path / "ledger"))


def _rows(store: MemlifeStore) -> list[tuple[Any, ...]]:
    path = store.store.path  # type: ignore[attr-defined]
    with sqlite3.connect(path) as con:
        return list(con.execute("select id, length(provenance) from records"))


def test_the_key_limit_matches_the_records_identifiers() -> None:
    from memlife.model import MemoryRecord

    assert KEY_MAX_CHARS == MemoryRecord.model_fields["id"].metadata[-1].max_length == 256


@pytest.mark.parametrize("length", [KEY_MAX_CHARS + 1, 10_000_000])
def test_an_over_long_key_is_refused_by_length_never_quoted(
    store: MemlifeStore, length: int
) -> None:
    key = "k" * length
    with pytest.raises(InputError) as info:
        store.put(NS, key, {"content": "Likes tea."})
    message = str(info.value)
    assert f"{length} characters" in message and str(KEY_MAX_CHARS) in message
    assert "k" * 50 not in message and len(message) < 400
    assert _rows(store) == [] and store.search(NS) == []


def test_an_over_long_key_with_an_over_long_value_names_the_key_first(
    store: MemlifeStore,
) -> None:
    with pytest.raises(InputError) as info:
        store.put(NS, "k" * 1_000_000, {"content": "x" * 1_000_000})
    assert "1000000 characters" in str(info.value) and len(str(info.value)) < 400


def test_a_key_at_the_limit_round_trips(store: MemlifeStore) -> None:
    key = "é" * KEY_MAX_CHARS  # characters, not bytes, as the record's own bounds
    store.put(NS, key, {"content": "Likes tea."})
    item = store.get(NS, key)
    assert item is not None and item.key == key and item.value == {"content": "Likes tea."}
    store.put(NS, key, None)  # and deletes
    assert store.get(NS, key) is None


def test_a_non_string_key_is_refused_by_type(store: MemlifeStore) -> None:
    """``put`` makes any key a string (``str(key)``); an op given to ``batch`` is not."""
    with pytest.raises(InputError, match="a int"):
        store.batch([PutOp(NS, 7, {"content": "Likes tea."})])  # type: ignore[arg-type]
    store.batch([PutOp(NS, 7, None)])  # type: ignore[arg-type]  # deleting: a no-op
    assert _rows(store) == []


@pytest.mark.parametrize(
    ("value", "what"),
    [
        ({1: "a"}, "int dict key"),
        ({"x": {"y": {(1, 2): 3}}}, "tuple dict key"),
        ({"x": (1, 2)}, "tuple"),
        ({"x": {1, 2}}, "set"),
        ({"x": b"\xff"}, "bytes"),
        ({"x": float("nan")}, "float nan"),
        ({"x": [1.0, float("inf")]}, "float inf"),
        ({"x": object()}, "object"),
    ],
    ids=["int-key", "nested-tuple-key", "tuple", "set", "bytes", "nan", "inf", "object"],
)
def test_a_value_json_cannot_carry_exactly_is_refused(
    store: MemlifeStore, value: dict[str, Any], what: str
) -> None:
    with pytest.raises(InputError) as info:
        store.put(NS, "v", value)
    message = str(info.value)
    assert what in message and "JSON" in message, message
    assert _rows(store) == [] and store.get(NS, "v") is None


def test_in_memory_store_keeps_python_objects_which_json_cannot() -> None:
    """Why refusing: LangGraph's own store gives back the int key (not "1") and the set."""
    ref = InMemoryStore()
    ref.put(NS, "v", {1: "a", "s": {1, 2}})
    item = ref.get(NS, "v")
    assert item is not None and item.value == {1: "a", "s": {1, 2}}


def test_json_values_round_trip_exactly(store: MemlifeStore) -> None:
    value = {
        "content": "Likes tea.", "n": 1, "f": 1.5, "neg": -0.0, "big": 2**70, "ok": True,
        "none": None, "nested": {"list": [1, "two", {"3": [None]}]}, "é": "ü",
    }  # fmt: skip
    store.put(NS, "v", value)
    item = store.get(NS, "v")
    assert item is not None and item.value == value
