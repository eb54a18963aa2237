"""Forty-fourth audit d (session 44): the nightly decisions on REAL unlabelled memories, LoCoMo
observations saved as an agent saves them (shared/data/README.md, "The lifecycle task":
actor = the sample id, namespace ``/conversations/<sample>/<speaker>``, semantic,
agent_inferred, confidence 0.8, created at the session's time, no subject, no owner),
through the real CLI on the embedded SQLite store, offline (extractive consolidator).

The observations are quoted from LoCoMo (CC BY-NC 4.0) for evaluation only.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tests.support.cli import invoke

# a reviewer's decision stamps the wall clock: the nights run from tomorrow on
NIGHT1 = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)
OUTCOMES = ("retained", "consolidated", "superseded", "deleted", "quarantined", "reviewed",
            "held", "failed")  # fmt: skip


def iso(t: datetime) -> str:
    return t.isoformat().replace("+00:00", "Z")


def ok(*args: str) -> str:
    code, out, err = invoke(*args)
    assert code == 0, (args, out, err)
    return out


def observation(sample: str, speaker: str, rid: str, text: str, at: str) -> dict[str, Any]:
    """One LoCoMo observation as the lifecycle task imports it."""
    return {"id": rid, "actor_id": sample, "namespace": f"/conversations/{sample}/{speaker}",
            "memory_type": "semantic", "content": text, "created_at": at,
            "source": "agent_inferred", "confidence": 0.8}  # fmt: skip


def seed(home: Path, lines: list[dict[str, Any]]) -> None:
    home.mkdir(parents=True, exist_ok=True)
    src = home / "observations.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in lines))
    assert json.loads(ok("import", str(src), "--json"))["imported"] == len(lines)


def night(now: datetime) -> dict[str, Any]:
    args = ("run", "--engine", "local", "--now", iso(now), "--allow-future-cutoff", "--json")
    return json.loads(ok(*args))


def open_items() -> list[dict[str, Any]]:
    return json.loads(ok("review", "list", "--json"))


def test_a_proposed_deletion_is_counted_in_an_outcome(home: Path) -> None:
    """A reviewer answers a LoCoMo POSSIBLE_UPDATE item with `supersede`; 100 days later the
    superseded observation is past `superseded_retention_days` (90), but deletion is not
    enforced under /conversations (the default policy's rollout): the night proposes the
    deletion and keeps the record. Every record the night processed must still land in
    exactly one outcome: it stays, so it is retained."""
    seed(home, REAL_UPDATES[:2])
    night(NIGHT1)
    (item,) = open_items()
    assert (item["record_id"], item["pair_id"]) == ("conv-49-s20-sam-000", "conv-49-s22-sam-000")
    ok("review", "resolve", item["item_id"], "--decision", "supersede", "--reviewer", "audit")
    later = night(NIGHT1 + timedelta(days=100))
    assert later["other_counts"]["proposed_deletions"] == 1  # kept: not enforced here
    life = later["lifecycle"]
    assert life["processed"] == sum(life[k] for k in OUTCOMES), life


def pair(sample: str, speaker: str, older: tuple[str, str, str], newer: tuple[str, str, str]):
    return [observation(sample, speaker, *older), observation(sample, speaker, *newer)]


# A negation in one text that is about none of the words the two share: no update either way
UNRELATED_NEGATION = [
    *pair("conv-30", "gina",
          ("conv-30-s4-gina-002", "Gina supports Jon through setbacks and encourages him not "
           "to give up.", "2023-02-04T10:43:00Z"),
          ("conv-30-s6-gina-005", "Gina sees Jon as someone on a different path but appreciates "
           "having him as someone to root for and support each other.", "2023-03-16T14:35:00Z")),
    *pair("conv-43", "tim",
          ("conv-43-s5-tim-002", "Tim is currently reading a fantasy book by Patrick Rothfuss "
           "which he finds awesome.", "2023-08-09T10:29:00Z"),
          ("conv-43-s9-tim-001", "Tim is not part of a sports team but enjoys reading fantasy "
           "novels.", "2023-08-26T18:59:00Z")),
    *pair("conv-41", "maria",
          ("conv-41-s11-maria-002", "Maria considers the people at the shelter like family to "
           "her.", "2023-04-10T18:13:00Z"),
          ("conv-41-s20-maria-001", "Maria's family has been her rock, giving her words of "
           "encouragement and reminding her she's not alone.", "2023-06-27T00:21:00Z")),
]  # fmt: skip

# Updates a reviewer should be asked about: the negated clause is what the newer one changes
REAL_UPDATES = [
    *pair("conv-49", "sam",
          ("conv-49-s20-sam-000", "Sam used to love hiking but hasn't had the chance to do it "
           "recently.", "2023-12-17T18:48:00Z"),
          ("conv-49-s22-sam-000", "Sam recently took friends on an epic hiking trip.",
           "2023-12-31T11:00:00Z")),
    *pair("conv-49", "sam",
          ("conv-49-s3-sam-000", "Sam is trying to eat healthier and recently trying to eat less "
           "processed food, but has made no changes yet.", "2023-06-06T15:55:00Z"),
          ("conv-49-s8-sam-001", "Sam has noticed positive changes from the diet, such as more "
           "energy and less sluggishness after eating.", "2023-08-19T18:17:00Z")),
]  # fmt: skip


def test_a_negation_about_nothing_shared_is_no_probable_update(home: Path) -> None:
    """Three pairs of one speaker's LoCoMo observations, months apart, each sharing one
    content word (support, reading/fantasy, family); one text of each negates something
    else ("not to give up", "not part of a sports team", "not alone"). Neither says the other
    is no longer true, yet the night opens a POSSIBLE_UPDATE item naming the newer one as
    "the newer record, which probably replaces it" (its supersede retires a true fact). No
    pair may be asked as an update."""
    seed(home, UNRELATED_NEGATION)
    night(NIGHT1)
    asked = [(i["record_id"], i["pair_id"]) for i in open_items()]
    assert asked == [], asked


def test_an_update_of_a_negated_clause_is_still_asked(home: Path) -> None:
    """The other side of the rule above: "hasn't had the chance to do it recently" then
    "recently took friends on an epic hiking trip", and "has made no changes yet" then "has
    noticed positive changes": the newer one changes what the older one denied. Each is asked
    as a probable update, the newer one named as the replacement."""
    seed(home, REAL_UPDATES)
    night(NIGHT1)
    asked = sorted((i["record_id"], i["pair_id"], i["reason"]) for i in open_items())
    assert asked == [
        ("conv-49-s20-sam-000", "conv-49-s22-sam-000", "POSSIBLE_UPDATE"),
        ("conv-49-s3-sam-000", "conv-49-s8-sam-001", "POSSIBLE_UPDATE"),
    ]


def test_a_used_to_about_something_else_is_no_probable_update() -> None:
    """Attacks ``shared_content_word`` in ``group.looks_like_update``: a newer observation
    with an update cue ("used to") about something the older never mentions (conv-26,
    Caroline: pets, then horseback riding as a kid) shares only the speaker's name; read as
    an update it would be asked to retire the pets fact. The same cue over a shared word
    (Sam's hiking) is still an update."""
    from memlife.group import looks_like_update

    assert not looks_like_update(
        "Caroline used to go horseback riding with her dad when she was a kid.",
        "Caroline values the role of pets in bringing joy and comfort.",
    )
    assert looks_like_update(
        "Sam recently took friends on an epic hiking trip.",
        "Sam used to love hiking but hasn't had the chance to do it recently.",
    )
