"""A model answer that says again what the actor erased (audit 43n).

The actor erased "I drink black coffee every morning." Two other records of theirs say it
in other words, and the model's faithful merge of them is, word for word, the erased
text. The replacement write refuses it (the tombstone: invariant 11 holds), the group is
withdrawn, and nothing remembers why: every night the group is sent again, answered the
same, and refused again, without end, never backing off nor reaching review.
Real SDK against the local Messages API server, real MiniLM, real SQLite store and erase.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from memlife.apply.rejections import MAX_REJECTIONS
from memlife.erase import erase
from memlife.model import Status
from memlife.stores.sqlite import SqliteStore
from tests.unit.test_consolidation_adversarial import (  # noqa: F401  (run_env: a fixture)
    NIGHT,
    T0,
    _answer,
    _run,
    _seed,
    _state,
    rec,
    run_env,
)

ERASED = "I drink black coffee every morning."


def test_an_answer_that_repeats_erased_text_is_not_asked_for_every_night(
    run_env: Path,  # noqa: F811 (the imported fixture)
    messages_server,
) -> None:
    """The model answers the erased text for the group, night after night. The text is
    never written, the originals stay, and the group is not sent more often than a
    refused answer would be (MAX_REJECTIONS, then review)."""
    _seed(run_env, [rec("e-1", ERASED, 0)])
    store = SqliteStore(run_env / "memlife.db")
    try:
        assert erase(store, "u-1", ids=["e-1"], now=T0 + timedelta(days=1))["erased"] == ["e-1"]
    finally:
        store.close()
    _seed(run_env, [rec("b-1", "Every morning I drink black coffee.", 2),
                    rec("b-2", "I drink black coffee each morning.", 4)])  # fmt: skip
    messages_server.set_handler(lambda _: _answer(ERASED, ["b-1", "b-2"]))
    for night in range(MAX_REJECTIONS + 2):  # nights far enough apart for any back-off
        receipt = _run(NIGHT + timedelta(days=10 * night))
        state = _state(run_env)
        assert [r.id for r in state.values() if r.content == ERASED] == []
        assert {state["b-1"].status, state["b-2"].status} == {Status.active}
    assert len(messages_server.message_requests) <= MAX_REJECTIONS
    assert receipt["other_counts"].get("consolidation_in_review") == 1
