"""Guards a mutation audit found unattacked (session 33, round e: superseded retention, orphaned
and pinned replacements, the access ledger's cutoff, the embedding cache's keys, the
evaluation set's digest, abandoned-run sealing): each test holds one guarantee that a named
guard in memlife/ alone keeps, and fails when that guard is removed or loosened. Real
components: the SQLite store, the MiniLM embedder, the Parquet ledger, the file sink."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memlife.embed import MiniLMEmbedder, default_embedder
from memlife.embed_cache import EmbeddingCache
from memlife.evalset import cases_digest, load_cases
from memlife.ledger import Access, AccessLedger
from memlife.model import MemoryRecord, RetentionClass, content_sha256, plan_view
from memlife.orphans import sources_follow
from memlife.pinned import hold_pinned
from memlife.plan import DELETE_ACTIONS, Action, Planner, Reason
from memlife.policy import load_policy
from memlife.stores.sqlite import SqliteStore

T0 = datetime(2026, 11, 1, 12, tzinfo=UTC)
POLICY = load_policy()
NS = "/users/u-1/facts"


def rec(rid: str, content: str = "Lives in Lisbon.", **kw: Any) -> MemoryRecord:
    base = dict(id=rid, actor_id="u-1", namespace=NS, memory_type="semantic", content=content,
                created_at=T0 - timedelta(days=30), subject="city", owner="team-a",
                last_accessed_at=T0 - timedelta(days=1), access_count=5,
                last_verified_at=T0 - timedelta(days=2))  # fmt: skip
    return MemoryRecord.model_validate({**base, **kw})


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    s = SqliteStore(tmp_path / "memlife.db")
    yield s
    s.close()


@pytest.fixture(scope="module")
def emb() -> MiniLMEmbedder:
    return default_embedder()


def planned(store: SqliteStore, *records: MemoryRecord) -> tuple[list[Any], list[Any]]:
    views = [plan_view(r) for r in records]
    return views, Planner(POLICY, T0).plan_shard([views], None)


# -- 1. orphans.py: a superseded record whose replacement no longer exists goes too ---------
def test_a_superseded_record_whose_replacement_is_gone_is_deleted(store: SqliteStore) -> None:
    """Attacks the ``elsewhere`` lookup in sources_follow: a reviewer's delete before
    session 27 removed B and left A superseded by nothing (invariant 3). The night is the
    safety net: A goes with its own receipted delete, REPLACEMENT_DELETED."""
    a = rec("A", status="superseded", provenance={"replaced_by": "B"},
            status_changed_at=T0 - timedelta(days=1))  # fmt: skip
    c = rec("C", "Works as a nurse.", subject="job")
    store.put_many([a, c])
    assert store.get("B") is None
    views, decisions = planned(store, store.get("A"), store.get("C"))
    by = {d.id: d for d in sources_follow(store, views, decisions)}
    assert by["A"].action is Action.delete_expired
    assert Reason.REPLACEMENT_DELETED in by["A"].reasons
    assert by["C"].action not in DELETE_ACTIONS


# -- 2. orphans.py: a hold placed after planning read the shard still keeps the record --------
def test_a_hold_placed_after_paging_keeps_an_orphaned_superseded_record(
    store: SqliteStore,
) -> None:
    """Attacks ``link.held`` in sources_follow's loop: the views were paged before a hold
    was placed on A; the links read now say held, so A is not planned for deletion
    (invariant 1) although its replacement is gone."""
    a = rec("A", status="superseded", provenance={"replaced_by": "B"},
            status_changed_at=T0 - timedelta(days=1))  # fmt: skip
    store.put_many([a])
    views, decisions = planned(store, store.get("A"))
    held = store.get("A").model_copy(update={"retention_class": RetentionClass.legal_hold})
    store.put_many([held])
    assert store.get("A").held
    by = {d.id: d for d in sources_follow(store, views, decisions)}
    assert by["A"].action not in DELETE_ACTIONS, by["A"]


# -- 3. pinned.py: a held source in another namespace pins its replacement here -------------
def test_a_held_source_in_another_namespace_pins_an_expiring_replacement(
    store: SqliteStore,
) -> None:
    """Attacks ``held += held_superseded(...)`` in hold_pinned: H (held, superseded, in
    another namespace of the actor: an import keeps such a link) says "replaced by R"; R
    does not list H (a status set online). R hard-expires, but deleting it would leave H
    superseded by nothing (invariants 1 and 3): R is held, HELD_SOURCE."""
    r = rec("R", "Lives in Porto.", expires_at=T0 - timedelta(days=1))
    h = rec("H", namespace="/users/u-1/old", status="superseded",
            retention_class="legal_hold", provenance={"replaced_by": "R"},
            status_changed_at=T0 - timedelta(days=3))  # fmt: skip
    store.put_many([r, h])
    views, decisions = planned(store, store.get("R"))
    assert decisions[0].action in DELETE_ACTIONS  # what the planner alone would do
    by = {d.id: d for d in hold_pinned(store, views, decisions)}
    assert by["R"].action is Action.hold
    assert Reason.HELD_SOURCE in by["R"].reasons


# -- 4. pinned.py: a source that names another replacement pins nothing here ---------------
def test_a_held_source_repointed_elsewhere_does_not_pin_its_old_replacement(
    store: SqliteStore,
) -> None:
    """Attacks ``source.replaced_by == rid`` in the up-walk of pinned_by_a_hold: R lists H
    among its sources, but H (held) was since re-pointed to X; H pins X, not R, so R's
    hard expiry goes ahead (an obligation, not to be deferred without cause)."""
    x = rec("X", "Lives in Faro.")
    r = rec("R", "Lives in Porto.", expires_at=T0 - timedelta(days=1),
            provenance={"supersedes": ["H"]})  # fmt: skip
    h = rec("H", status="superseded", retention_class="legal_hold",
            provenance={"replaced_by": "X"}, status_changed_at=T0 - timedelta(days=3))  # fmt: skip
    store.put_many([x, r, h])
    views, decisions = planned(store, store.get("R"))
    assert decisions[0].action in DELETE_ACTIONS
    by = {d.id: d for d in hold_pinned(store, views, decisions)}
    assert by["R"].action in DELETE_ACTIONS, by["R"]
    assert Reason.HELD_SOURCE not in by["R"].reasons


# -- 5. ledger.py: a read at exactly the cutoff counts ---------------------------------------
def test_a_read_at_exactly_the_cutoff_is_counted(tmp_path: Path) -> None:
    """Attacks ``pc.less_equal`` in AccessLedger.actor_stats: reads up to and including
    the run's cutoff are the night's; one a second later is the next night's."""
    led = AccessLedger(tmp_path / "ledger", flush_seconds=None)
    try:
        led.extend([
            Access("u-1", NS, "m-1", T0 - timedelta(hours=1)),
            Access("u-1", NS, "m-1", T0),
            Access("u-1", NS, "m-1", T0 + timedelta(seconds=1)),
        ])  # fmt: skip
        got = led.actor_stats(until=T0)[("u-1", "m-1")]
        assert got.count == 2
        assert got.last == T0
    finally:
        led.close()


# -- 6. embed_cache.py: a stored vector of another dimension is re-embedded -----------------
def test_a_stale_dimension_vector_is_re_embedded(tmp_path: Path, emb: MiniLMEmbedder) -> None:
    """Attacks the ``d == dim`` check in EmbeddingCache._lookup: a row left by an earlier
    build of the same model id with another dimension is stale, never served."""
    text = "Prefers the window seat on long flights."
    cache = EmbeddingCache(emb, path=tmp_path / "emb.db")
    try:
        stale = np.ones(8, dtype=np.float32) / np.sqrt(8)
        cache.connection.execute(  # type: ignore[union-attr]
            "INSERT INTO embeddings VALUES (?, ?, ?, ?)",
            (content_sha256(text), emb.model_id, 8, stale.tobytes()),
        )
        got = cache.get_or_embed_texts([text])
        assert got.shape == (1, emb.dim)
        fresh = np.asarray(emb.embed([text]), dtype=np.float32)[0]
        assert float(got[0] @ fresh) > 0.999
        assert cache.stats.misses == 1
    finally:
        cache.close()


# -- 7. embed_cache.py: another model's vector is never served ------------------------------
def test_another_models_vector_is_never_served(tmp_path: Path, emb: MiniLMEmbedder) -> None:
    """Attacks ``model_id=?`` in EmbeddingCache._lookup_blobs: a vector of the same
    content and dimension under another model id lives in another space; serving it would
    rank recall by meaningless cosines."""
    text = "Allergic to peanuts and tree nuts."
    cache = EmbeddingCache(emb, path=tmp_path / "emb.db")
    try:
        other = np.zeros(emb.dim, dtype=np.float32)
        other[0] = 1.0
        cache.connection.execute(  # type: ignore[union-attr]
            "INSERT INTO embeddings VALUES (?, ?, ?, ?)",
            (content_sha256(text), "other-model-v2", emb.dim, other.tobytes()),
        )
        got = cache.get_or_embed_texts([text])[0]
        fresh = np.asarray(emb.embed([text]), dtype=np.float32)[0]
        assert float(got @ fresh) > 0.999
        assert cache.stats.hits == 0
    finally:
        cache.close()


# -- 8. evalset.py: the digest covers every rule of a case, not its formatting ---------------
CASE = {"id": "c-1", "query": "Where does the user live?", "actor_id": "u-1",
        "must_retrieve": ["m-1"], "forbidden": [{"claim": "lives in Lisbon"}], "k": 5,
        "min_result": 1.0, "threshold": 0.3}  # fmt: skip


def test_case_digest_is_stable_under_reformatting_and_moves_with_k(tmp_path: Path) -> None:
    """Attacks what cases_digest covers: the memo re-opens a gate-blocked group only when
    the set changed. The same cases as YAML and as JSONL are one set; a case that now
    looks at 3 results instead of 5 (or passes at a lower recall or threshold) is another."""
    yml = tmp_path / "cases.yaml"
    yml.write_text(
        "# reformatted\ncases:\n  - id: c-1\n    actor_id: u-1\n    query: Where does the user"
        " live?\n    k: 5\n    threshold: 0.3\n    must_retrieve: [m-1]\n"
        "    forbidden:\n      - claim: lives in Lisbon\n"
    )
    jl = tmp_path / "cases.jsonl"
    jl.write_text(json.dumps(CASE) + "\n")
    base = cases_digest(load_cases(jl))
    assert cases_digest(load_cases(yml)) == base
    for change in ({"k": 3}, {"min_result": 0.5}, {"threshold": 0.1}):
        jl.write_text(json.dumps({**CASE, **change}) + "\n")
        assert cases_digest(load_cases(jl)) != base, change


# -- 9. run_abandoned.py: a dry run's manifest without a receipt is never sealed ------------
def test_a_dry_run_without_a_receipt_is_not_sealed_as_abandoned(tmp_path: Path) -> None:
    """Attacks the ``dry_run`` check in _seal_one: a dry run takes no lease, so the next
    apply run cannot know it is dead (it may be previewing right now); sealing it would
    write a failure/ABANDONED receipt over a run still under way. An apply run of the same
    store left without a receipt is sealed (the control)."""
    from memlife.audit import FileSink
    from memlife.journal import open_journal
    from memlife.run_abandoned import seal_abandoned
    from memlife.stores import store_identity

    db = tmp_path / "memlife.db"
    url = f"sqlite:///{db}"
    sink = FileSink(tmp_path / "receipts")
    runs = {"dry_run": "20261101T110000Z-dry_run-0000000001",
            "apply": "20261101T100000Z-apply-0000000002"}  # fmt: skip
    for mode, rid in runs.items():
        manifest = {"run_id": rid, "mode": mode, "store_identity": store_identity(url),
                    "cutoff": T0.isoformat(), "policy_version": POLICY.version,
                    "started_at": T0.isoformat()}  # fmt: skip
        key = f"runs/2026/11/01/{rid}/manifest.json"
        assert sink.put_new(key, json.dumps(manifest).encode(), "application/json")
    store = SqliteStore(db)
    try:
        sealed = seal_abandoned(sink, open_journal(store), store_url=url,
                                run_id="20261101T120000Z-apply-0000000003", cutoff=T0, now=T0)  # fmt: skip
    finally:
        store.close()
    assert sealed == [runs["apply"]]
    assert sink.get(f"runs/2026/11/01/{runs['dry_run']}/receipt.json") is None


# -- 10. policy_record.py: a run that loses the race to keep the policy still compares ------
def test_an_edited_policy_losing_the_race_to_keep_its_version_is_refused(tmp_path: Path) -> None:
    """Attacks the re-read after a failed put_new in check_policy: two first runs under one
    version start together; the other keeps the shipped rules first, so this run's
    create-only put fails. Its edited rules (superseded retention 1 day instead of 90) under
    the same version must then be refused, not applied under receipts naming that version."""
    import yaml

    from memlife.audit import FileSink
    from memlife.errors import PolicyError
    from memlife.policy import Policy
    from memlife.policy_record import check_policy, policy_key

    shipped = Path("policies/default.yaml").read_bytes()
    data = yaml.safe_load(shipped)
    data["superseded_retention_days"]["standard"] = 1
    edited = Policy.model_validate(data)
    assert edited.version == POLICY.version

    class Racing(FileSink):
        """The other run's create lands between this run's read and its create."""

        def put_new(self, key: str, body: bytes, content_type: str = "application/json") -> bool:
            super().put_new(key, shipped, content_type)
            return super().put_new(key, body, content_type)

    sink = Racing(tmp_path / "receipts")
    with pytest.raises(PolicyError, match="names other rules"):
        check_policy(sink, edited, yaml.safe_dump(data).encode(), record=True)
    assert sink.get(policy_key(POLICY.version)) == shipped
    # the control: the shipped rules under the same race are accepted
    assert check_policy(Racing(tmp_path / "r2"), POLICY, shipped, record=True) is None


# -- 11. superseded_since.py: retention ends exactly N days after the journal's supersede ---
def test_superseded_retention_from_the_journal_ends_on_the_same_boundary_as_the_stamp(
    store: SqliteStore,
) -> None:
    """Attacks the strict ``>`` in count_from_supersede: the planner deletes a superseded
    record once stamp + retention <= cutoff; counted from the journal's time it must end on
    the same boundary (a record superseded exactly 90 days ago goes tonight, not tomorrow).
    The control: one the journal superseded a day later (a catch-up run's stamp lies
    earlier) is kept."""
    from memlife.journal import Operation, OpKind, OpState, Outcome, open_journal
    from memlife.superseded_since import count_from_supersede

    days = POLICY.superseded_retention_days["standard"]
    stamp = T0 - timedelta(days=days)
    recs = [rec(rid, status="superseded", provenance={"replaced_by": "N"}, status_changed_at=stamp,
                created_at=stamp - timedelta(days=10)) for rid in ("A", "B")]  # fmt: skip
    store.put_many([rec("N", "Lives in Porto."), *recs])
    journal = open_journal(store)
    journal.plan([Operation(operation_id=f"o-{r.id}", run_id="run-1", kind=OpKind.supersede,
                            actor_id="u-1", namespace=NS, record_id=r.id, reasons=[],
                            policy_version=POLICY.version, replacement_id="N")
                  for r in recs])  # fmt: skip
    journal.transition("o-A", OpState.APPLIED, outcome=Outcome.superseded, at=stamp)
    journal.transition("o-B", OpState.APPLIED, outcome=Outcome.superseded,
                       at=stamp + timedelta(days=1))  # fmt: skip
    views, decisions = planned(store, *(store.get(r.id) for r in recs))
    assert all(Reason.SUPERSEDED_RETENTION in d.reasons for d in decisions)
    by = {d.id: d for d in count_from_supersede(store, POLICY, T0, views, decisions)}
    assert by["A"].action is Action.delete_expired
    assert by["B"].action is Action.retain
    assert by["B"].reasons == [Reason.ALREADY_SUPERSEDED]
