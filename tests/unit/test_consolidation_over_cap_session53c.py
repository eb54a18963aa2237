"""A record past the model's seats is never superseded on the planner's label alone (audit 53c).

The model reads at most ``grouping.max_group_size`` records of a group (12 by default): the
survivor and the newest others. The rest of the group (the oldest near duplicates and the
older statements the planner found contradicted) was superseded by the same replacement
"by rule" (``over_cap``), though no model read them and the coverage check
(consolidate/coverage.py) never compared them with the summary. Coverage's own rule is that
a planner's label alone retires nothing ("Alice is severely allergic to peanuts and carries
an EpiPen", answered as a duplicate of "Alice is allergic to peanuts", was superseded
unchecked: session 29 review). Past the cap it did all the same: twelve restatements of
"I am allergic to peanuts." and an older "I am severely allergic to peanuts and carry an
EpiPen." made one replacement saying "I am allergic to peanuts.", the EpiPen superseded;
with ``max_group_size: 2`` an older "I am allergic to shellfish." went the same way.

Past the cap, only a copy of a text the model read (the same content hash) is merged
tonight; any other waits for a later night, when the model reads it beside this night's
replacement (as the members past MAX_MEMBERS already did).

The real anthropic SDK against the local Messages API server, the real MiniLM embedder,
and the real pipeline on the embedded SQLite store.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import memlife.group_plan as gp
from memlife.model import MemoryRecord
from memlife.pipeline import RunConfig, run_local
from memlife.policy import Grouping, load_policy
from tests.fakes.messages_api import MessagesServer, Reply
from tests.unit.test_consolidation_adversarial import (
    NIGHT,
    RECORD,
    _seed,
    _state,
    careful,
    rec,
    run_env,  # noqa: F401 - the pipeline tests' fixture
)

PEANUTS = "I am allergic to peanuts."
EPIPEN = "I am severely allergic to peanuts and carry an EpiPen."
SHELLFISH = "I am allergic to shellfish."


@pytest.fixture(name="messages_server")
def _messages_server() -> Iterator[MessagesServer]:
    with MessagesServer() as server:
        yield server


def _allergy(rid: str, text: str, day: int) -> MemoryRecord:
    return rec(rid, text, day, subject="allergy")


def _night(messages_server: MessagesServer, policy: Path | None = None, days: int = 0) -> list[list[str]]:  # fmt: skip
    """One apply night; the ids the model was shown, per request."""
    shown: list[list[str]] = []

    def answer(body: dict[str, Any]) -> Reply:
        shown.append(sorted(rid for _, rid, _ in RECORD.findall(body["messages"][0]["content"])))
        return careful(body)  # the newest text, every record named

    messages_server.set_handler(answer)
    config = RunConfig(dry_run=False, now=NIGHT + timedelta(days=days))
    if policy is not None:
        config = RunConfig(dry_run=False, now=NIGHT + timedelta(days=days), policy=str(policy))
    run_local(config)
    return shown


def _policy(tmp_path: Path, cap: int) -> Path:
    text = Path("policies/default.yaml").read_text()
    assert "max_group_size: 12 " in text
    path = tmp_path / f"cap{cap}.yaml"
    path.write_text(text.replace("max_group_size: 12 ", f"max_group_size: {cap} "))
    return path


def test_an_older_detail_past_the_cap_is_not_superseded_unread(
    run_env: Path,  # noqa: F811
    messages_server: MessagesServer,
) -> None:
    copies = [_allergy(f"a-{i:02d}", PEANUTS, 1 + i) for i in range(1, 13)]
    _seed(run_env, [_allergy("a-00", EPIPEN, 1), *copies])
    shown = _night(messages_server)
    assert len(shown) == 1 and "a-00" not in shown[0]  # the model read twelve: not a-00
    state = _state(run_env)
    assert state["a-00"].status.value == "active"  # the EpiPen is still said


def test_a_second_allergy_past_a_cap_of_two_is_not_superseded_unread(
    run_env: Path,  # noqa: F811
    messages_server: MessagesServer,
    tmp_path: Path,
) -> None:
    _seed(run_env, [_allergy("b-0", SHELLFISH, 1), _allergy("b-1", PEANUTS, 3),
                    _allergy("b-2", PEANUTS, 6)])  # fmt: skip
    _night(messages_server, _policy(tmp_path, 2))
    assert _state(run_env)["b-0"].status.value == "active"


def test_a_cap_of_three_shows_the_second_allergy_and_the_merge_is_refused(
    run_env: Path,  # noqa: F811
    messages_server: MessagesServer,
    tmp_path: Path,
) -> None:
    """Control: where the model reads it, coverage refuses the merge that drops it."""
    _seed(run_env, [_allergy("b-0", SHELLFISH, 1), _allergy("b-1", PEANUTS, 3),
                    _allergy("b-2", PEANUTS, 6)])  # fmt: skip
    shown = _night(messages_server, _policy(tmp_path, 3))
    assert shown == [["b-0", "b-1", "b-2"]]
    assert {r.status.value for r in _state(run_env).values()} == {"active"}


def test_copies_past_the_cap_of_a_text_the_model_read_are_merged(
    run_env: Path,  # noqa: F811
    messages_server: MessagesServer,
) -> None:
    """Control: fifteen copies of one text: the model reads twelve, the three older copies
    say what it read word for word and are merged with them the same night."""
    _seed(run_env, [_allergy(f"c-{i:02d}", PEANUTS, 1 + i) for i in range(15)])
    shown = _night(messages_server)
    assert len(shown) == 1 and len(shown[0]) == 12
    state = _state(run_env)
    assert all(state[f"c-{i:02d}"].status.value == "superseded" for i in range(15))


def test_the_plan_merges_past_the_cap_only_copies_of_what_the_model_reads() -> None:
    """The decision itself (group_plan.plan_group): a near duplicate and a contradicted
    statement past the cap are not members tonight; a copy of a text sent is."""
    policy = load_policy()
    old = [gp.Member.of(_allergy("n-0", EPIPEN, 1)),
           gp.Member.of(_allergy("n-1", SHELLFISH, 2)),
           gp.Member.of(_allergy("n-2", PEANUTS, 3))]  # fmt: skip
    new = [gp.Member.of(_allergy(f"n-{i}", PEANUTS, i)) for i in range(4, 8)]
    members = [*old, *new]
    rows = {m.statement: [1.0, 0.0] for m in members}
    rows[old[1].statement] = [0.0, 1.0]  # shellfish: another statement, older (contradicted)

    def vectors(keys: Any) -> Any:
        import numpy as np

        return np.asarray([rows[k] for k in keys], dtype=np.float32)

    roomy = gp.plan_group(members, vectors, grouping=Grouping(max_group_size=12),
                          weights=policy.source_weights)  # fmt: skip
    assert roomy is not None and len(roomy.to_model) == 7  # the model reads all seven
    assert (roomy.roles["n-0"], roomy.roles["n-1"]) == (gp.NEAR_DUPLICATE, gp.CONTRADICTION)
    plan = gp.plan_group(members, vectors, grouping=Grouping(max_group_size=3),
                         weights=policy.source_weights)  # fmt: skip
    assert plan is not None and plan.to_model == ["n-5", "n-6", "n-7"]
    assert sorted(plan.ids) == ["n-2", "n-4", "n-5", "n-6", "n-7"]  # copies of a text sent
    assert plan.over_cap == 2
    # offline (the extractive consolidator reads no text, within the cap or past it) the
    # rules still merge all seven
    offline = gp.plan_group(members, vectors, grouping=Grouping(max_group_size=3),
                            weights=policy.source_weights, merge_unread=True)  # fmt: skip
    assert offline is not None and len(offline.ids) == 7 and offline.over_cap == 4


def test_the_record_that_waited_is_read_the_next_night_beside_the_replacement(
    run_env: Path,  # noqa: F811
    messages_server: MessagesServer,
) -> None:
    """The next night the model reads the record that waited beside the replacement: the
    answer that drops the EpiPen is refused there (coverage), nothing is superseded unread."""
    copies = [_allergy(f"a-{i:02d}", PEANUTS, 1 + i) for i in range(1, 13)]
    _seed(run_env, [_allergy("a-00", EPIPEN, 1), *copies])
    _night(messages_server)
    (replacement,) = {r.id for r in _state(run_env).values() if r.id.startswith("r-")}
    shown = _night(messages_server, days=1)
    assert shown == [sorted(["a-00", replacement])]
    state = _state(run_env)
    assert state["a-00"].status.value == "active" and state[replacement].status.value == "active"
