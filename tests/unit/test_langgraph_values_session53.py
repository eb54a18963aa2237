"""Session 53 (audit 53d's Left): an integer past Python's digit limit in a LangGraph value.

``put(ns, k, {"n": 10**5000})`` failed in ``json.dumps`` with a bare ValueError naming
neither item nor field; and a stored json item holding such a literal (written by a process
that raised ``sys.set_int_max_str_digits``) made ``decode`` fail every get and search of
its prefix.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("langgraph.store.base")

from memlife import Memory  # noqa: E402
from memlife.errors import InputError  # noqa: E402
from memlife.integrations.langgraph import MemlifeStore, record_id  # noqa: E402
from memlife.integrations.langgraph_values import json_problem  # noqa: E402
from memlife.model import content_sha256  # noqa: E402

NS, PATH = ("users", "u1", "facts"), "/users/u1/facts"
HUGE = "9" * (sys.get_int_max_str_digits() + 1)


@pytest.fixture(name="lg")
def _lg(home: Path) -> Iterator[MemlifeStore]:
    store = MemlifeStore(Memory(f"sqlite:///{home / 'memlife.db'}", ledger=home / "ledger"))
    yield store
    store.memory.close()


def test_a_put_of_an_integer_past_the_digit_limit_is_refused_by_name(lg: MemlifeStore) -> None:
    with pytest.raises(InputError, match="too many digits"):
        lg.put(NS, "n", {"n": 10**5000, "note": "big"})
    assert lg.get(NS, "n") is None  # nothing written


def test_ordinary_integers_still_go_through(lg: MemlifeStore) -> None:
    """Control: a long but convertible integer is stored and read back exactly."""
    big = 10 ** (sys.get_int_max_str_digits() - 1)
    assert json_problem({"n": big}) is None
    lg.put(NS, "n", {"n": big})
    assert lg.get(NS, "n").value == {"n": big}


def test_a_stored_item_with_such_a_literal_does_not_fail_its_prefix(lg: MemlifeStore) -> None:
    lg.put(NS, "ok", {"n": 1})
    lg.put(NS, "huge", {"n": 2})
    rid = record_id("u1", PATH, "huge")
    rec = lg.store.get(rid)
    text = '{"n":' + HUGE + "}"  # what a process with a raised limit wrote
    lg.store.put_many([rec.model_copy(update={
        "content": text,
        "provenance": rec.provenance.model_copy(update={"content_sha256": content_sha256(text)}),
    })])  # fmt: skip
    lg.memory.long_term.invalidate()
    assert lg.get(NS, "ok").value == {"n": 1}
    assert lg.get(NS, "huge").value == {"content": text}  # read as its text
    assert {i.key for i in lg.search(NS)} == {"ok", "huge"}
