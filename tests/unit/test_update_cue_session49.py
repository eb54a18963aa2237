"""Audit 49v (session 49): the offline update cue on real, unlabelled memories.

LoCoMo observations saved as an agent saves them (shared/data/README.md, "The lifecycle
task": no subject, no owner, one namespace per speaker), one apply night: 38 records go to
review as POSSIBLE_UPDATE, each item naming the newer record as "probably replaces it".
Read by hand, four of them are opened by an update word the text itself denies, and one by
a "no" that denies nothing:

- "give up" / "quit" governed by a negation ("encourages Jon to keep pushing ... and not
  give up", "a reminder to stick to her goals and never give up", "they do not quit"):
  the text says nothing was given up. All six "give up"s of LoCoMo's 2,541 observations
  are negated; none is an update.
- "no matter how small" is a concession, not a denial: "their actions, no matter how
  small, can have a big impact" was read as turning round "every small act of kindness
  can have a big effect" (the word both use, "small", stands after the "no").

A `supersede` on such an item (the default decision the item proposes) retires a fact
that is still true. The pairs below paraphrase LoCoMo (CC BY-NC 4.0, evaluation only).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memlife.group import looks_like_update
from tests.support.cli import invoke

# (older, newer): what the newer says is no change of the older
NEGATED_CUE = [
    ("Gina cheers Jon on to keep pushing, assuring him he'll reach his dreams.",
     "Gina urges Jon to keep pushing for his dreams and not give up."),
    ("Jolene values support in hard times and finds it essential for life's challenges.",
     "Jolene finds a quote in her bullet journal motivating and uses it as a reminder to "
     "stick to her goals and never give up."),
    ("Deborah tells Jolene that her efforts will pay off and urges her not to give up.",
     "Deborah urges Jolene to focus on her goals, not give up, and offers help with "
     "mindfulness practice."),
    ("John found fitting into the new team's style of play a challenge in pre-season.",
     "John's team faced tough opponents, but they do not quit and back each other up to "
     "improve."),
]  # fmt: skip

CONCESSION = [
    ("Maria believes every small act of kindness can have a big effect.",
     "Maria believes their actions, no matter how small, can have a big impact on the "
     "community."),
]  # fmt: skip


@pytest.mark.parametrize(("older", "newer"), NEGATED_CUE)
def test_an_update_word_the_text_denies_is_no_update(older: str, newer: str) -> None:
    assert not looks_like_update(newer, older)


@pytest.mark.parametrize(("older", "newer"), CONCESSION)
def test_a_concession_is_no_denial(older: str, newer: str) -> None:
    assert not looks_like_update(newer, older)


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        ("Sam drinks soda every day.", "Sam gave up soda."),
        ("Sam works at the bank downtown.", "Sam quit his job at the bank."),
        ("Sam plays drums in a band.", "Sam stopped playing drums in the band."),
        ("Sam lives in a flat in Boston.", "Sam moved out of the flat in Boston."),
        ("Sam plays chess online.", "Sam does not play chess online any more."),
        ("Sam runs every morning.", "Sam no longer runs in the morning."),
        # a negation elsewhere in the text leaves the cue standing
        ("Sam smokes cigarettes after dinner.", "Sam never liked it and quit cigarettes."),
        # a real denial still flips
        ("Maria believes small acts matter.", "Maria no longer believes small acts matter."),
        ("Sam is happy with his job.", "Sam is not happy with his job."),
    ],
)  # fmt: skip
def test_real_updates_are_still_read(older: str, newer: str) -> None:
    """Control: an update word standing on its own, or a real denial, is still an update."""
    assert looks_like_update(newer, older)


# -- one night through the CLI, on the embedded SQLite store (real MiniLM) ------------------
NIGHT = datetime(2024, 1, 14, tzinfo=UTC)


def _ok(*args: str) -> str:
    code, out, err = invoke(*args)
    assert code == 0, (args, out, err)
    return out


def _observations(pairs: list[tuple[str, str]]) -> list[dict[str, Any]]:
    rows = []
    for n, (older, newer) in enumerate(pairs):
        speaker = f"speaker{n}"
        for k, text in enumerate((older, newer)):
            rows.append({
                "id": f"conv-x-{speaker}-{k}", "actor_id": "conv-x",
                "namespace": f"/conversations/conv-x/{speaker}", "memory_type": "semantic",
                "content": text, "source": "agent_inferred", "confidence": 0.8,
                "created_at": (NIGHT - timedelta(days=60 - 30 * k)).isoformat(),
            })  # fmt: skip
    return rows


def _night_items(home: Path, pairs: list[tuple[str, str]]) -> list[tuple[str, str | None]]:
    home.mkdir(parents=True, exist_ok=True)
    src = home / "observations.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in _observations(pairs)))
    _ok("import", str(src))
    _ok("run", "--engine", "local", "--now", NIGHT.isoformat(), "--json")
    items = json.loads(_ok("review", "list", "--json"))
    return sorted((i["record_id"], i["pair_id"]) for i in items)


def test_a_night_asks_no_update_for_a_denied_cue_or_a_concession(home: Path) -> None:
    """The five pairs, each in its own speaker's namespace, one month apart: the night
    must open no POSSIBLE_UPDATE item (it opened one per pair)."""
    assert _night_items(home, NEGATED_CUE + CONCESSION) == []


def test_a_night_still_asks_a_real_update(home: Path) -> None:
    """Control: the same night on two real updates (a cue standing on its own) asks both."""
    pairs = [
        ("Sam works at the bank downtown and enjoys it.", "Sam quit his job at the bank."),
        ("Sam plays drums in a local band.", "Sam gave up playing drums in the band."),
    ]
    assert _night_items(home, pairs) == [
        ("conv-x-speaker0-0", "conv-x-speaker0-1"),
        ("conv-x-speaker1-0", "conv-x-speaker1-1"),
    ]


def test_an_item_the_older_rule_opened_is_closed_after_the_upgrade(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The operator's store had its first night under the rule before this fix: Gina's
    pair is a POSSIBLE_UPDATE item whose default decision retires the older, true record.
    After the upgrade no night pairs the two again; the item must not wait for a reviewer
    for ever (as an item about two records of one instant is closed, session 30): the texts
    the store holds no longer read as an update."""
    import memlife.derived as derived_mod
    import memlife.group as group
    from memlife.text import _UPDATE_CUE

    with monkeypatch.context() as before_the_fix:
        before_the_fix.setattr(
            group, "update_cue", lambda text: _UPDATE_CUE.search(text) is not None, raising=False
        )
        before_the_fix.setattr(derived_mod, "VERSION", "derived-13:before-49v")
        assert _night_items(home, NEGATED_CUE[:1]) == [("conv-x-speaker0-0", "conv-x-speaker0-1")]
    _ok("run", "--engine", "local", "--now", (NIGHT + timedelta(days=1)).isoformat(), "--json")
    assert json.loads(_ok("review", "list", "--json")) == []
