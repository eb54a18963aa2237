"""Session 47 (audit 47t): tests that kill mutations of session 47's code the earlier passes left alive.

Real components: the SQLite store, the memlife CLI in-process, the real gate and evidence.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from memlife.erase import erase
from memlife.evalset import parse_cases
from memlife.gate import ShadowRecall, coverage, evaluate
from memlife.ledger import AccessLedger
from memlife.model import Status, utcnow
from memlife.online.memory import LongTermMemory
from memlife.policy import PolicyError, load_policy
from memlife.stores.sqlite import SqliteStore
from tests.fakes.messages_api import MessagesServer
from tests.support.cli import invoke
from tests.support.gate import ACTOR, rec, store_at
from tests.unit.test_gate_session47 import ALLERGY, ALLERGY_CASE, U1_DOG, U2, duplicate, night
from tests.unit.test_receipts_session47 import _put, endpoint, pristine, s3  # noqa: F401

DEFAULT_POLICY = Path(__file__).resolve().parents[2] / "policies" / "default.yaml"


def test_evaluate_on_demand_does_not_count_a_record_past_its_deadline_as_retrieved(
    home: Path,
) -> None:
    """A record still active in the store but past its deadline is never served by online
    recall. `evaluate` (memlife eval) must judge the store as recall serves it: a case that
    needs that record fails, as it does at night."""
    store = store_at(home)
    gone = rec("m-visa", "facts", "Visa appointment on Tuesday.", subject="visa",
               expires=utcnow() - timedelta(days=1))  # fmt: skip
    store.put_many([gone, rec("m-dog", "facts", "Has a dog named Rex.", subject="pet")])
    cases = parse_cases([{"id": "visa", "query": "When is the visa appointment?",
                          "actor_id": ACTOR, "must_retrieve": ["m-visa"], "k": 5}])  # fmt: skip
    try:
        assert evaluate(store, cases)["failed_cases"] == ["visa"]
    finally:
        store.close()


def test_an_erasure_case_of_an_actor_whose_every_record_was_erased_still_covers(
    home: Path,
) -> None:
    """u-1 has every record erased: only tombstones say the store knew u-1. An erasure case
    watching that emptied view checks something (the erased id must not come back): it is
    not NO_RECORDS, as a case of an actor this store never knew would be."""
    store = store_at(home)
    store.put_many([rec("m-nut", "facts", "Allergic to peanuts.", subject="allergy")])
    store.close()
    code, out, err = invoke("erase", "--actor", ACTOR, "--id", "m-nut", "--yes")
    assert code == 0, (out, err)
    cases = parse_cases([
        {"id": "erased-nut", "kind": "erased", "query": "peanut allergy", "actor_id": ACTOR,
         "forbidden": ["m-nut"]},
        {"id": "erased-else", "kind": "erased", "query": "peanut allergy", "actor_id": "nobody",
         "forbidden": ["m-9"]},
    ])  # fmt: skip
    store = store_at(home)
    try:
        assert [u["case"] for u in coverage(cases, ShadowRecall(store))] == ["erased-else"]
    finally:
        store.close()


@pytest.fixture()
def model(monkeypatch: pytest.MonkeyPatch, messages_server: MessagesServer) -> MessagesServer:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", messages_server.base_url)
    messages_server.set_handler(duplicate)
    return messages_server


def test_the_group_of_the_actor_whose_high_impact_case_fails_regardless_is_held(
    home: Path, tmp_path: Path, model: MessagesServer
) -> None:
    """As in test_gate_session47, u-1's high-impact case fails before and after (its target
    erased), but u-1 now owns a duplicate group too. The narrowing that lets the other
    tenants' supersedes through applies only when the failing actor owns no replacement:
    u-1's own merge, judged by nothing that passes, must wait."""
    store = store_at(home)
    dog2 = rec("m-dog-2", "facts", "Has a dog named Rex.", subject="pet", age=20)
    store.put_many([ALLERGY, U1_DOG, dog2, *U2])
    store.close()
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps(ALLERGY_CASE) + "\n")
    code, out, err = invoke("erase", "--actor", ACTOR, "--id", "m-allergy", "--yes")
    assert code == 0, (out, err)

    summary = night(str(cases), 0)

    assert summary["gate"]["before"]["high_impact_failed"] == ["allergy"]
    store = store_at(home)
    try:
        assert {store.get(i).status for i in ("m-dog", "m-dog-2")} == {Status.active}  # type: ignore[union-attr]
    finally:
        store.close()


def test_receipts_list_says_a_run_it_cannot_read_is_unreadable_not_incomplete(
    s3: dict,  # noqa: F811
) -> None:
    """A run folder whose manifest answers 403 is listed, and as what it is: `unreadable`,
    not `incomplete` (a run that never wrote its receipt: a crash an operator reruns)."""
    other = f"{s3['folder'].rsplit('/', 1)[0]}/20261101T130000Z-apply-0000000000"
    _put(s3, f"{other}/manifest.json", b'{"run_id": "20261101T130000Z-apply-0000000000"}')
    s3["denied"].add(f"m/{other}/manifest.json")
    code, out, err = invoke("receipts", "list", "--receipts", s3["url"], "--json")
    assert code == 0, err
    status = {r["run_id"]: r["status"] for r in json.loads(out)}
    assert status["20261101T130000Z-apply-0000000000"] == "unreadable", status


def test_a_memory_closed_twice_leaves_the_shared_ledgers_other_watch(home: Path) -> None:
    """Two Memory objects share one ledger; one is closed twice (a `with` block and an
    explicit close). The second close must not take back the other's watch: the other's
    buffered read of a record erased before the flush is still not written."""
    store = SqliteStore(home / "memlife.db")
    ledger = AccessLedger(home / "ledger", flush_seconds=None)
    agent = LongTermMemory(store, ledger=ledger)
    side = LongTermMemory(store, ledger=ledger)
    try:
        rid = agent.remember("u1", "/users/u1/facts", None, "My locker code is 4471.").record_id
        side.close()
        side.close()
        assert [h.record.id for h in agent.recall("u1", "locker code")] == [rid]
        with SqliteStore(home / "memlife.db") as other:
            erase(other, "u1", ids=[rid])
        ledger.flush()
        assert rid not in ledger.read().column("record_id").to_pylist()
    finally:
        agent.close()
        store.close()


def test_recall_on_a_store_with_a_change_signal_lists_namespaces_once(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On SQLite (a change signal) the actor's namespace list is read again when the store
    changes, not on a timer: with refresh_seconds=0 and nothing written, two recalls read
    it once (the timer is for stores with no signal, AgentCore)."""
    listed: list[str] = []
    real = SqliteStore.list_namespaces

    def counted(self: SqliteStore, actor: str, *a: Any, **kw: Any) -> Any:
        listed.append(actor)
        return real(self, actor, *a, **kw)

    store = SqliteStore(home / "memlife.db")
    memory = LongTermMemory(store, ledger=AccessLedger(home / "ledger"), refresh_seconds=0)
    try:
        memory.remember("u1", "/users/u1/facts", None, "Has a dog named Rex.")
        monkeypatch.setattr(SqliteStore, "list_namespaces", counted)
        assert memory.recall("u1", "dog") and memory.recall("u1", "dog name")
        assert listed == ["u1"]
    finally:
        memory.close()
        store.close()


def _policy_with(tmp_path: Path, **changes: Any) -> Path:
    data = yaml.safe_load(DEFAULT_POLICY.read_text())
    data.update(changes)
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True))
    return path


def test_an_owner_with_a_stray_closing_brace_is_refused(tmp_path: Path) -> None:
    """`owner: "{actor}}"`: the placeholder is replaced, the stray `}` stays a literal in
    every owner the rule hands out. The loader refuses it as it refuses `{actor`."""
    path = _policy_with(tmp_path, owners=[{"namespace": "/users/*/**", "owner": "{actor}}"}])
    with pytest.raises(PolicyError, match=r"key 'owners\.0\.owner'"):
        load_policy(path)


def test_the_longest_version_its_kept_file_can_name_is_accepted_and_one_more_refused(
    tmp_path: Path,
) -> None:
    """`policies/{version}.yaml` may be 255 bytes: a 250-character version just fits, and
    251 characters would not be writable on the apply run, so the loader refuses it."""
    assert load_policy(_policy_with(tmp_path, version="v" * 250)).version == "v" * 250
    with pytest.raises(PolicyError, match="version"):
        load_policy(_policy_with(tmp_path, version="v" * 251))


def test_a_policy_file_that_is_not_utf8_is_an_invalid_policy(tmp_path: Path) -> None:
    """An editor saves the policy in Latin-1 (`description: café`): the loader must refuse
    it as an invalid policy (PolicyError, exit 2), not crash with UnicodeDecodeError."""
    path = _policy_with(tmp_path, description="café")
    path.write_bytes(path.read_text().encode("latin-1"))
    with pytest.raises(PolicyError, match="UTF-8"):
        load_policy(path)


def test_a_group_left_as_it_is_counts_its_records_as_retained(home: Path) -> None:
    """Every processed record is in exactly one outcome (audits 47j, 47q, 47r), also for
    a group no merge is made of: consolidation switched off, a pair the extractive rule
    keeps apart, and the same pair the next night (settled from the memo: no re-read)."""
    from tests.unit.test_counts_session47 import NOW as NOW47
    from tests.unit.test_counts_session47 import ROLLOUT, lands, night, rec, seed

    seed(home, [rec("a", ROLLOUT, "The user lives in Oslo.", age=40),
                rec("b", ROLLOUT, "The user lives in Oslo.", age=35),
                rec("c", ROLLOUT, "The user drinks coffee.", age=30, subject="drinks"),
                rec("d", ROLLOUT, "The user also drinks green tea.", age=10, subject="drinks")])  # fmt: skip
    off = night("--no-consolidate")
    assert off["other_counts"]["consolidation_skipped"] == 2, off["other_counts"]
    lands(off["lifecycle"])
    first, second = (night(now=NOW47 + timedelta(days=d)) for d in (0, 1))
    assert first["lifecycle"]["retained"] == 2, first["lifecycle"]  # c, d: kept apart
    lands(first["lifecycle"])
    lands(second["lifecycle"])


def test_a_trailing_double_star_matches_zero_or_more_whole_segments() -> None:
    """`**` matches any number of whole segments, zero included (namespaces module doc):
    the memoised matcher of audit 47l must still let a trailing `**` take the rest of the
    path, or none of it, and no partial segment."""
    from memlife.namespaces import glob_match

    assert glob_match("/users/*/**", "/users/u1")
    assert glob_match("/users/**", "/users/u1/facts")
    assert glob_match("/users/**/facts/**", "/users/u1/a/facts")
    assert not glob_match("/users/**/facts", "/users/u1/factsx")
