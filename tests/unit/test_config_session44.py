"""A careless operator's configuration (audit 44f, session 44): numbers YAML 1.1 reads in another base,
settings with a stray space, and spans the settings accept that the night cannot add."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memlife.policy import PolicyError, load_policy
from memlife.stores.sqlite import SqliteStore
from tests.support.cli import invoke
from tests.support.records import good

REPO = Path(__file__).resolve().parents[2]
DEFAULT = REPO / "policies" / "default.yaml"
NOW = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)
EPISODIC_TTL = "    default_ttl_days: 365        # applied when a record has no expires_at"


def _policy(tmp_path: Path, old: str, new: str, version: str = "audit44f") -> Path:
    text = DEFAULT.read_text()
    assert old in text
    text = text.replace(old, new, 1).replace(
        'version: "2026.11-default.4"', f'version: "{version}"'
    )
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    return path


# -- 1. YAML 1.1 numbers in another base ----------------------------------------------------
@pytest.mark.parametrize(
    ("old", "new", "key"),
    [
        (EPISODIC_TTL, "    default_ttl_days: 030", "memory_types.episodic.default_ttl_days"),
        ("pending_delete_grace_days: 7", "pending_delete_grace_days: 014",
         "pending_delete_grace_days"),
        ("  sensitive: 30\n", "  sensitive: 060\n", "superseded_retention_days.sensitive"),
    ],
    ids=["ttl", "grace", "superseded retention"],
)  # fmt: skip
def test_a_zero_padded_day_count_is_not_read_as_octal(
    tmp_path: Path, old: str, new: str, key: str
) -> None:
    """The operator pads a day count with a zero (030, as 365 has three digits): PyYAML
    reads it as octal, 24, and the policy loaded a TTL six days shorter than written (a
    grace of 12 for 014, a retention of 48 for 060). It must be refused, or read as written."""
    written = float(new.split(":")[1])
    try:
        policy = load_policy(_policy(tmp_path, old, new)).model_dump()
    except PolicyError as exc:
        assert "line" in str(exc)
        return
    for part in key.split("."):
        policy = policy[part]
    assert policy == written


def test_a_night_under_a_zero_padded_ttl_keeps_what_the_operator_meant_to_keep(
    home: Path, tmp_path: Path
) -> None:
    """A 30-day TTL written ``030`` (no evaluation set required): a 25-day-old episodic
    record in an enforced namespace was deleted. It must still be there after the night
    (the run refused, or the TTL read as 30)."""
    created = (NOW - timedelta(days=25)).isoformat().replace("+00:00", "Z")
    row = good("m-25", namespace="/users/u-1/episodes", memory_type="episodic",
               created_at=created, last_verified_at=created)  # fmt: skip
    src = tmp_path / "r.jsonl"
    src.write_text(json.dumps(row) + "\n")
    assert invoke("import", str(src))[0] == 0
    policy = _policy(tmp_path, EPISODIC_TTL, "    default_ttl_days: 030")
    policy.write_text(policy.read_text().replace("  required: true ", "  required: false "))
    invoke("run", "--engine", "local", "--now", NOW.isoformat(), "--policy", str(policy))
    with SqliteStore(home / "memlife.db") as store:
        kept = store.get("m-25")
    assert kept is not None and kept.status == "active"


# -- 2. a stray space at the end of a store or home setting ----------------------------------
@pytest.mark.parametrize("variable", ["MEMLIFE_STORE", "MEMLIFE_HOME"])
def test_a_trailing_space_in_the_store_or_home_is_refused_not_a_second_store(
    home: Path, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    """An env file leaves a space after the value. MEMLIFE_RECEIPTS refuses it ("evidence
    written elsewhere is lost evidence"); MEMLIFE_STORE and MEMLIFE_HOME kept it, and
    `remember` created ``memlife.db `` (or ``home /``) beside the real store and wrote the
    memory there, where no night expires or erases it. It must be refused (exit 2), naming
    the variable, with no second store made."""
    db = home / "memlife.db"
    SqliteStore(db).close()
    if variable == "MEMLIFE_HOME":
        monkeypatch.delenv("MEMLIFE_STORE")
        monkeypatch.setenv("MEMLIFE_HOME", f"{home} ")
    else:
        monkeypatch.setenv("MEMLIFE_STORE", f"sqlite:///{db} ")
    code, _, err = invoke("remember", "--actor", "u-1", "Prefers aisle seats.")
    assert code == 2 and variable in err
    assert sorted(p.name for p in home.parent.iterdir()) == ["home"]
    assert sorted(p.name for p in home.iterdir()) == ["memlife.db"]


# -- 3. MEMLIFE_STATE's ttl_days in seconds ---------------------------------------------------
def test_a_state_ttl_the_journal_cannot_add_to_a_date_is_refused_before_any_change() -> None:
    """``ttl_days=31536000`` (a year, written in seconds as DynamoDB's TTL attribute is)
    parsed; the journal then moved a delete to APPLIED and failed to receipt it with a
    bare OverflowError (the record gone, its operation never finished), every night. It
    must be refused naming ttl_days, or the operation receipted."""
    from memlife.journal import OpState, Outcome
    from memlife.journal.dynamodb import DynamoJournal
    from memlife.state import StateSettingsError, parse_state_url
    from memlife.state.dynamodb import DynamoState
    from tests.contract.test_journal_contract import op
    from tests.support.aws_state import aws_state

    with aws_state("inprocess") as (url, _):
        try:
            parsed = parse_state_url(url + "&ttl_days=31536000")
        except StateSettingsError as exc:
            assert "ttl_days" in str(exc)
            return
        assert parsed is not None
        journal = DynamoJournal(DynamoState(parsed))
        (planned,) = journal.plan([op("m-1")])
        journal.transition(planned.operation_id, OpState.APPLIED, outcome=Outcome.deleted)
        journal.transition(planned.operation_id, OpState.RECEIPTED)
        assert journal.get(planned.operation_id).state is OpState.RECEIPTED


# -- 4. a jitter factor written as a percentage -----------------------------------------------
def test_a_jitter_factor_written_as_a_percentage_is_refused(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``MEMLIFE_RETRY_JITTER=50`` (50 % meant, 0.5 the unit): each throttled batch's wait
    is ``delay * (1 + uniform(-50, 50))`` (throttling.retried; Prefect's clamp the same), so
    the 15-minute cap of MEMLIFE_RETRY_BACKOFF_SECONDS became up to 12.75 hours a wait. A
    factor over 1 must be refused, naming the variable."""
    from memlife.errors import SettingsError
    from memlife.settings import settings

    monkeypatch.setenv("MEMLIFE_RETRY_JITTER", "50")
    with pytest.raises(SettingsError, match="MEMLIFE_RETRY_JITTER"):
        settings()


# -- 5. guards no test held (weak tests) ------------------------------------------------------
@pytest.mark.parametrize(
    ("url", "says"),
    [("file://", "two slashes"), ("s3://bkt/p?endpointurl=", "endpointurl")],
    ids=["file with no path", "misspelt s3 parameter left blank"],
)
def test_a_receipts_url_with_no_folder_or_a_blank_misspelt_parameter_is_refused(
    url: str, says: str
) -> None:
    """Attacks ``not url[len("file://"):]`` and ``keep_blank_values=True`` in
    ``audit.receipts_url_problem``: ``file://`` (the path forgotten) opened a sink on the
    working directory, and a misspelt parameter with no value was dropped before the
    unknown-parameter check. Both must be refused before any sink is opened."""
    from memlife.audit import open_sink, receipts_url_problem

    problem = receipts_url_problem(url)
    assert problem is not None and says in problem
    with pytest.raises(ValueError, match="receipts URL"):
        open_sink(url)


@pytest.mark.parametrize("field", ["enforce_deletion_in", "owners"])
def test_a_dot_segment_in_a_policy_glob_is_refused_by_key(tmp_path: Path, field: str) -> None:
    """Attacks the ``"."`` in ``policy._namespace_glob``'s segment check (only "" and ".."
    were tested): ``/users/./facts`` can match no namespace memlife accepts, so the rule it
    was meant to be never applies. Refused, naming the key."""
    if field == "owners":
        old, new = '"/users/*/**", owner', '"/users/./**", owner'
    else:
        old, new = '  - "/users/*/facts"', '  - "/users/./facts"'
    with pytest.raises(PolicyError, match=rf"key '{field}\.\d+(\.namespace)?'.*no namespace glob"):
        load_policy(_policy(tmp_path, old, new))


def test_a_state_url_with_a_trailing_space_is_refused() -> None:
    """``...&parquet=s3://b/p `` named the prefix "p ": the ledger and reports went to
    another prefix. Refused, naming the spaces."""
    from memlife.state import StateSettingsError, parse_state_url

    with pytest.raises(StateSettingsError, match="spaces"):
        parse_state_url("dynamodb://t?region=us-east-1&parquet=s3://b/p ")
