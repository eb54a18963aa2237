"""A record id the prompt shows otherwise can still be named by a faithful answer (audit 51c).

The prompt quotes each record's id in its tag's attribute, and a quote or an angle bracket
there is shown as ``'``, ``(`` or ``)`` so that an id cannot close the attribute or open a
tag (prompts._attr, session 10). An import takes such ids (``note "1"``, ``<42>``: only
invisible characters are refused). A model that names the records exactly as it was shown
them was refused UNKNOWN_SOURCE, every night, counted against the group until it waited
for a reviewer for good: a group holding such a record could never be merged by a model,
and the receipts blamed the model for the prompt's quoting. A shown id that names one
record and no other record's own id is read as that record's; one two records share, or
that is another record's own id, still names nobody.

The real anthropic SDK against the local Messages API server, the real MiniLM embedder,
and the real pipeline on the embedded SQLite store.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memlife.consolidate import ConsolidationError
from memlife.consolidate.base import Group
from memlife.embed import MiniLMEmbedder, default_embedder
from tests.fakes.messages_api import MessagesServer, Reply
from tests.unit.test_consolidation_adversarial import (
    COFFEE,
    NIGHT,
    RECORD,
    _answer,
    _make,
    _run,
    _seed,
    _state,
    careful,
    rec,
    run_env,  # noqa: F401 - the pipeline tests' fixture
)

QUOTED = ('note "1"', "note <2>")  # two ids the prompt shows as note '1' and note (2)


@pytest.fixture(name="messages_server")
def _messages_server() -> Iterator[MessagesServer]:
    with MessagesServer() as server:
        yield server


@pytest.fixture(scope="module")
def emb() -> MiniLMEmbedder:
    return default_embedder()


def _pair(*ids: str, newer: str = COFFEE) -> Group:
    records = [rec(ids[0], COFFEE, 1), rec(ids[1], newer, 6)]
    return Group("k", "u-1", records[0].namespace, "coffee", records)


def _shown(body: dict[str, Any]) -> list[str]:
    """The ids as the request shows them (oldest first)."""
    return [rid for _, rid, _ in RECORD.findall(body["messages"][0]["content"])]


def test_a_duplicate_naming_the_ids_as_shown_is_taken(
    messages_server: MessagesServer, emb: MiniLMEmbedder
) -> None:
    messages_server.set_handler(careful)
    result = _make(messages_server, emb).consolidate(_pair(*QUOTED))
    assert _shown(messages_server.message_requests[0].body) == ["note '1'", "note (2)"]
    assert sorted(result.source_ids) == sorted(QUOTED)


def test_an_update_naming_the_outdated_id_as_shown_retires_that_record(
    messages_server: MessagesServer, emb: MiniLMEmbedder
) -> None:
    tea = "I drink green tea every morning now."

    def update(body: dict[str, Any]) -> Reply:
        old, new = _shown(body)
        return _answer(tea, [new], relation="update", outdated_ids=[old])

    messages_server.set_handler(update)
    result = _make(messages_server, emb).consolidate(_pair(*QUOTED, newer=tea))
    assert (result.source_ids, result.outdated_ids) == ([QUOTED[1]], [QUOTED[0]])


def test_records_with_such_ids_are_merged_by_the_night(run_env: Path, messages_server) -> None:  # noqa: F811
    _seed(run_env, [rec(QUOTED[0], COFFEE, 1), rec(QUOTED[1], COFFEE, 6)])
    messages_server.set_handler(careful)
    receipt = _run(NIGHT)
    assert receipt["counts"]["consolidated"] == 1
    assert "UNKNOWN_SOURCE" not in receipt["model"].get("rejections", {})
    state = _state(run_env)
    assert {state[i].status.value for i in QUOTED} == {"superseded"}


@pytest.mark.parametrize("ids", [("a'b", 'a"b'), ("x(1)", "x<1>")], ids=["quote", "bracket"])
def test_a_shown_id_that_could_name_either_record_names_none(
    messages_server: MessagesServer, emb: MiniLMEmbedder, ids: tuple[str, str]
) -> None:
    """Control: where one record's id is shown as the other's own id (both shown alike),
    the answer cannot say which it means: still refused, nothing taken."""
    messages_server.set_handler(careful)
    with pytest.raises(ConsolidationError) as info:
        _make(messages_server, emb).consolidate(_pair(*ids))
    assert info.value.code in {"UNKNOWN_SOURCE", "INCOMPLETE_SOURCES"}


def test_plain_ids_are_named_as_they_are(
    messages_server: MessagesServer, emb: MiniLMEmbedder
) -> None:
    """Control: ids the prompt shows as they are, and an id no record has, as before."""
    messages_server.set_handler(careful)
    result = _make(messages_server, emb).consolidate(_pair("b-1", "b-2"))
    assert sorted(result.source_ids) == ["b-1", "b-2"]
    messages_server.set_handler(lambda body: _answer(COFFEE, ["b-1", "b-2", "b-9"]))
    with pytest.raises(ConsolidationError) as info:
        _make(messages_server, emb).consolidate(_pair("b-1", "b-2"))
    assert info.value.code == "UNKNOWN_SOURCE"
