"""Session 45 (audit 45j): mutation survivors of session 45's code: tests that pin what they let slip.

Each test names the mutation it kills (file, function, change).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from botocore.exceptions import ClientError

from memlife import unprocessed
from memlife.apply import Tally
from memlife.apply.group_resume import resume_group
from memlife.apply.lifecycle import run_lifecycle
from memlife.fold_versions import v5_norm_sha256
from memlife.group import _negated_words
from memlife.holds import place_hold
from memlife.importer import import_file
from memlife.journal import OpKind, Outcome
from memlife.model import Status, utcnow
from memlife.online.compaction_cuts import round_cuts, round_start
from memlife.online.memory import LongTermMemory
from memlife.pipeline import RunConfig, run_local
from memlife.quarantine import manual_run, purge
from memlife.run_types import operator_config
from memlife.state.dynamodb import key
from memlife.stores.sqlite import SqliteStore
from memlife.text import FOLD, FOLD_LEADING_POINT, FOLD_SIGNS, symbols_as_words
from memlife.tombstones import insert_new
from tests.fakes.messages_api import Reply, text_reply
from tests.support.aws_state import aws_state
from tests.support.records import good
from tests.unit.test_compaction_session45 import THINK, result, use
from tests.unit.test_consolidation_adversarial import (  # noqa: F401  (run_env: a fixture)
    NIGHT,
    _seed,
    rec,
    run_env,
)
from tests.unit.test_dynamo_unprocessed_session45 import HoldBack
from tests.unit.test_fold_session26 import rec as fold_rec
from tests.unit.test_guards_session33 import held
from tests.unit.test_guards_session33 import rec as grec
from tests.unit.test_guards_session36e import _group, env, executor  # noqa: F401  (env: a fixture)
from tests.unit.test_model_unavailable_alone import BLOCKED, _down
from tests.unit.test_purge_session45 import ENFORCED, T0, _policy


def _probe_costs_seven(body: dict[str, Any]) -> Reply:
    if body["messages"][0]["content"] == "ping":  # the probe answers, at a known cost
        return text_reply("pong", input_tokens=7, output_tokens=1)
    return _down()


def test_a_probe_is_counted_in_the_runs_model_usage(
    run_env: Path,  # noqa: F811 (the imported fixture)
    messages_server,
) -> None:
    """The tea group alone fails; the one-token probe answers (7 tokens in, 1 out). The
    probe is a paid request: the run's model usage counts it, calls and tokens alike.
    (Kills dropping ``tally.model_calls += 1`` or ``tally.input_tokens += ...`` in
    apply/unavailable._probe_answered.)"""
    _seed(run_env, [rec("t-1", f"I drink {BLOCKED} every evening.", 1, subject="tea"),
                    rec("t-2", f"Every evening I drink {BLOCKED}.", 3, subject="tea")])  # fmt: skip
    messages_server.set_handler(_probe_costs_seven)
    model = run_local(RunConfig(dry_run=False, now=NIGHT)).model
    assert model["calls"] == len(messages_server.message_requests) == 2
    assert (model["input_tokens"], model["output_tokens"]) == (7, 1)


KIRITIMATI = ZoneInfo("Pacific/Kiritimati")  # UTC+14: another day than UTC at noon


def test_a_scheduled_start_in_another_zone_is_the_utc_cutoff() -> None:
    """The flow hands its scheduled start in its own zone (UTC+14): the pinned cutoff is
    the same instant in UTC, so the run id and its folder name the UTC day, as a cutoff
    given directly does. (Kills ``scheduled.astimezone(UTC)`` -> ``scheduled`` in
    run_types.operator_config; model_copy does not run the validator.)"""
    scheduled = utcnow().replace(microsecond=0).astimezone(KIRITIMATI)
    config = operator_config(RunConfig(dry_run=False), scheduled=scheduled)
    assert config.now == scheduled and config.now.utcoffset() == timedelta(0)


def test_a_manual_runs_time_in_another_zone_names_the_utc_instant(home: Path) -> None:
    """An operator's purge is given ``now`` as 02:00 the next day at UTC+14: the run id
    labelled Z names the UTC instant (12:00), not the local wall time. (Kills
    ``now.astimezone(UTC)`` -> ``now`` in quarantine.manual_run.)"""
    noon = datetime(2026, 11, 1, 12, tzinfo=UTC)
    with SqliteStore(home / "memlife.db") as store:
        run = manual_run(store, "purge", ["m-1"], now=noon.astimezone(KIRITIMATI))
        run.release()
    assert run.run_id.startswith(f"manual-{noon:%Y%m%dT%H%M%S%fZ}-"), run.run_id


@pytest.mark.parametrize(
    "text", ["I like coffee and the tea is not good", "Well, I like coffee, the tea is not good"]
)
def test_a_negation_denies_only_its_own_clause(text: str) -> None:
    """Words before a negation are denied only back to the last mark or linking word
    ("and" included): the coffee liked in the first clause is not denied with the tea.
    (Kills dropping ``and|or`` from group._CLAUSE_START, or its ``.*`` made lazy, which
    takes the first mark instead of the last.)"""
    assert _negated_words(text) == {"tea", "good"}


def test_each_store_versions_fold_reads_points_as_it_did() -> None:
    """A store written under version 5 is read with its own fold: a leading point is
    "0." there, and a point between digits stays (only version 6 reads it as a word);
    version 4 knew neither. Keys of an older store must not change under it.
    (Kills ``fold >= FOLD`` -> ``fold >= FOLD_LEADING_POINT`` around _INNER_POINT, or
    ``fold >= FOLD_LEADING_POINT`` -> ``fold >= FOLD`` before _LEADING_POINT, text.py.)"""
    text = "take .5 mg or 1.5 mg"
    assert symbols_as_words(text, fold=FOLD_SIGNS) == text
    assert symbols_as_words(text, fold=FOLD_LEADING_POINT) == "take 0.5 mg or 1.5 mg"
    assert symbols_as_words(text, fold=FOLD) == "take 0 point 5 mg or 1 point 5 mg"


def _loop(*, first: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A turn whose first assistant message is ``first``, then two tool rounds."""
    return [{"role": "user", "content": "Audit every file."}, {"role": "assistant", "content": first},
            {"role": "user", "content": [result("f0")]},
            {"role": "assistant", "content": [use("f1")]},
            {"role": "user", "content": [result("f1")]},
            {"role": "assistant", "content": [use("f2")]},
            {"role": "user", "content": [result("f2")]}]  # fmt: skip


def test_only_the_current_turns_thinking_round_is_kept_before_the_summary() -> None:
    """The thinking that opens a tool loop pins its first round only in the turn still
    under way (the API checks that one); an earlier turn's rounds are summarised from its
    request, and a first answer with no tool results after it pins nothing. (Kills
    dropping ``end != len(messages) or`` or ``has_tool_result(...)``, or
    ``task + 2 >= end`` -> ``>``, in compaction_cuts.round_start.)"""
    turn = _loop(first=[THINK, use("f0")])
    later = [*turn, {"role": "user", "content": "Now fix them."}]
    assert round_start(turn, 0, len(turn)) == 2
    assert round_start(later, 0, len(turn)) == 0  # an earlier turn
    answered = [{"role": "user", "content": "Hi"},
                {"role": "assistant", "content": [THINK, {"type": "text", "text": "Hello"}]},
                {"role": "user", "content": "Audit every file."}]  # fmt: skip
    assert round_start(answered, 0, len(answered)) == 0
    assert round_start(answered[:2], 0, 2) == 0  # no message after the first answer


def test_no_round_cut_falls_on_the_kept_first_round() -> None:
    """With the first round kept (``at``), the first cut lies after the next round, not
    right after the kept results (a cut there summarises nothing). (Kills ``range(at + 2,
    end)`` -> ``range(task + 2, end)`` in compaction_cuts.round_cuts.)"""
    turn = _loop(first=[THINK, use("f0")])
    assert round_cuts(turn, 0, len(turn), 1, at=2) == [5]
    assert round_cuts(turn, 0, len(turn), 1) == [3, 5]


def test_items_held_back_for_good_are_resent_a_bounded_number_of_times(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """DynamoDB holds back an item of every batch write for good: the state table sends the
    request UNPROCESSED_TRIES times, with a growing pause before each resend (none before
    the first), then raises. (Kills ``tries >= UNPROCESSED_TRIES`` -> ``>`` and dropping
    the pause in unprocessed.before_send.)"""
    pauses: list[float] = []
    monkeypatch.setattr(unprocessed.time, "sleep", pauses.append)
    with aws_state("inprocess") as (_, state):
        hold = HoldBack(state.ddb, always=True, limit=100)
        with pytest.raises(ClientError):
            state.batch_write(puts=[{**key("perase", "m-1"), "at": {"S": "x"}}])
    assert hold.calls["BatchWriteItem"] == unprocessed.UNPROCESSED_TRIES
    assert len(pauses) == unprocessed.UNPROCESSED_TRIES - 1
    assert pauses == sorted(pauses) and pauses[0] > 0


def test_a_version_5_tombstone_of_a_leading_and_inner_point_still_refuses(
    tmp_path: Path,
) -> None:
    """An erased "Take .5 to 1.5 mg" written at version 5 holds a key unlike both today's
    and version 4's (".5" was "0.5" there, "1.5" still "1 5"): the text is still refused.
    (Kills dropping the version-5 key in sqlite.tombstone_norms; the existing test's text
    has the same key at versions 4 and 5.)"""
    text = "Take .5 to 1.5 mg"
    with SqliteStore(tmp_path / "m.db") as s:
        s.connection.execute(
            "INSERT INTO tombstones VALUES (?, ?, ?, ?, ?)",
            ("u1", "m-v5", "0" * 64, v5_norm_sha256(text), "2026-01-01"),
        )
        got = insert_new(s, [fold_rec("m-again", text)])
    assert [(f.id, f.code) for f in got.failed] == [("m-again", "ERASED_CONTENT")]


def test_a_purge_plans_no_delete_of_a_held_source(home: Path, tmp_path: Path) -> None:
    """A night merges m-1 and m-2; the operator holds m-1; the user quarantines the
    replacement and the operator purges it. The held source is no follower of the purge:
    no delete of it is planned (it stays, pinning its replacement), m-2 goes, receipted.
    (Kills ``if not s.held`` dropped from quarantine._followers.)"""
    policy = _policy(tmp_path)
    lines = [good(rid, actor_id="u-1", namespace=ENFORCED, subject="city", content=text,
                  created_at=(T0 - timedelta(days=age)).isoformat(),
                  last_verified_at=(T0 - timedelta(days=age)).isoformat())
             for rid, text, age in (("m-1", "Lives in Paris.", 30),
                                    ("m-2", "Lives in Paris now.", 5))]  # fmt: skip
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(x) + "\n" for x in lines))
    with SqliteStore(home / "memlife.db") as store:
        assert import_file(store, src, now=T0).imported == 2
    assert run_local(RunConfig(dry_run=False, now=T0, policy=policy)).status == "success"
    with SqliteStore(home / "memlife.db") as store:
        place_hold(store, ids=["m-1"], policy=policy)
        with LongTermMemory(store) as mem:
            repl = store.get("m-1").provenance.replaced_by
            assert mem.set_status([repl], "quarantined", actor="u-1") == [repl]
        out = purge(store, 0, policy=policy)
        assert store.get("m-1") is not None
    assert "m-1" not in {o["record_id"] for o in out["operations"]}, out["operations"]


def _written_then(env: Any, done: int, move: Any) -> dict[tuple[str, OpKind], Any]:  # noqa: F811
    """m-a and m-b merged into m-r; the first ``done`` operations carried out (then a
    crash); ``move`` changes the first source still to supersede; the group resumed: its operations by (record, kind)."""
    store = env[0]
    a, b = grec("m-a"), grec("m-b", "Likes tea a lot.")
    store.put_many([a, b])
    ex = executor(env)
    planned = _group(ex, [a, b])
    finished = run_lifecycle(ex, planned[:done], Tally())
    (pending, *_) = [o.record_id for o in planned[done:]]
    move(store, store.get(pending))
    resume_group(ex, [*finished, *planned[done:]], Tally())
    return {(o.record_id, o.kind): o for o in ex.journal.by_run(ex.run_id)}


def test_a_source_forgotten_after_the_write_withdraws_the_group(env: Any) -> None:  # noqa: F811
    """After the replacement is written, the user quarantines a source (its text
    unchanged): the group is withdrawn before any supersede, m-r taken back under a
    receipted delete, the other source stays active.
    (Kills dropping ``r.status is not Status.active or`` in group_resume._left_since, since session 46 the withdrawal at the supersedes, appliers/status.py.)"""
    ops = _written_then(env, 1, lambda s, b: s.set_status([b.id], Status.quarantined))
    assert ops[("m-r", OpKind.delete)].outcome is Outcome.deleted
    assert env[0].get("m-r") is None
    assert Status.active in {env[0].get(i).status for i in ("m-a", "m-b")}


def test_a_source_moved_after_a_supersede_is_done_withdraws_nothing(env: Any) -> None:  # noqa: F811
    """The write and one supersede were done before the crash; then the other source is
    edited. The replacement stays (the superseded source points to it): only the edited
    source's own supersede re-checks it.
    (Kills dropping the ``o.state is not OpState.PLANNED`` return of _left_since; since session 46 ``ex.withdrawable``.)"""
    edit = lambda s, b: s.put_many([b.model_copy(update={"content": "Likes coffee now."})])  # noqa: E731
    ops = _written_then(env, 2, edit)
    assert ("m-r", OpKind.delete) not in ops
    assert env[0].get("m-r") is not None


def test_a_held_source_edited_after_the_write_withdraws_nothing(env: Any) -> None:  # noqa: F811
    """After the write, a source is put under a hold and edited: a held source is no
    reason to withdraw the group (its own supersede keeps it): the replacement stays.
    (Kills dropping ``is_held(r) or`` in group_resume._left_since, since session 46 the withdrawal at the supersedes, appliers/status.py.)"""
    move = lambda s, b: s.put_many([held(b.model_copy(update={"content": "Likes coffee."}))])  # noqa: E731
    ops = _written_then(env, 1, move)
    assert ("m-r", OpKind.delete) not in ops
    assert env[0].get("m-r") is not None
