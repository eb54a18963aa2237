"""(session 44) Mutation survivors of session 44's code (audit 44j): tests that pin what they let slip.

Each test names the mutation it kills: the outcome sweep's stray key names, a remote sweep
without the store's lease, the run-id mode rule, and the outage probe schedule.
"""

from __future__ import annotations

import pytest

from memlife.consolidate import ConsolidationError
from memlife.consolidate.anthropic import OUTAGE_CALLS
from memlife.consolidate.prompts import TOOL_NAME
from memlife.outcome_sweep import _mode_of, sweep_for_run, sweep_local
from memlife.pipeline import RunConfig
from memlife.stores import store_identity
from tests.fakes.messages_api import error_reply, tool_use_reply
from tests.support.aws_state import aws_state
from tests.unit.test_consolidation_adversarial import PAIR, _make
from tests.unit.test_erasure_stale_outcomes import NOW
from tests.unit.test_outcome_sweep import APPLY

DOWN = error_reply(529, "overloaded_error", "Overloaded")
OK = tool_use_reply(TOOL_NAME, {
    "summary": "I drink black coffee.", "claims": ["I drink black coffee."],
    "confidence": 0.9, "source_ids": ["s-0", "s-1"]})  # fmt: skip


def test_a_stray_run_key_name_is_no_attempt(home) -> None:
    """A file in run-keys named '<run id>.' (no attempt) is not an attempt's sealing key:
    the lease holder's sweep leaves it. (Kills ``if dot and attempt`` -> ``if dot``:
    outcome_sweep._attempts.)"""
    keys = home / "run-keys"
    keys.mkdir(parents=True)
    (keys / f"{APPLY}.").write_bytes(b"k" * 32)
    me = store_identity(f"sqlite:///{home / 'memlife.db'}")
    assert sweep_local(me, holds_lease=True, ours=(APPLY, "a-ours")) == 0
    assert (keys / f"{APPLY}.").exists()


def test_a_name_of_two_parts_names_no_mode() -> None:
    """Only a run id of the form <cutoff>-<mode>-<hash> names a mode: a folder 'x-apply'
    is no apply run's, so no lease holder sweeps it as one. (Kills ``len(parts) > 2`` ->
    ``> 1`` in outcome_sweep._mode_of.)"""
    assert _mode_of(APPLY) == "apply"
    assert _mode_of("backup-apply") == ""


def test_a_remote_run_without_the_lease_sweeps_nothing(home) -> None:
    """A run on remote state that does not hold the store's lease (a dry run) must leave the
    run id's other attempts' outcomes: another attempt may still run. (Kills ``if
    holds_lease:`` -> ``if True:`` in outcome_sweep.sweep_for_run.)"""
    from memlife.run_start import start_run
    from memlife.state.reports import report_prefix

    with aws_state("inprocess") as (url, state):
        ctx = start_run(RunConfig(dry_run=False, now=NOW, state=url))
        bucket = state.settings.parquet_bucket
        other = f"{report_prefix(state, ctx.run_id, NOW, 'live')}/outcomes/0.pickle"
        state.s3.put_object(Bucket=bucket, Key=other, Body=b"x")
        sweep_for_run(ctx, state, holds_lease=False)
        assert state.s3.list_objects_v2(Bucket=bucket, Prefix=other).get("KeyCount") == 1
        sweep_for_run(ctx, state, holds_lease=True)
        assert state.s3.list_objects_v2(Bucket=bucket, Prefix=other).get("KeyCount") == 0


def _send(c, n: int) -> None:
    for _ in range(n):
        try:
            c.consolidate(PAIR)
        except ConsolidationError:
            pass


def test_the_probes_come_after_exactly_doubling_holds(messages_server) -> None:
    """Down for 40 groups: OUTAGE_CALLS sent, then probes after 5, 10 and 20 held back
    (groups 10, 20, 40): OUTAGE_CALLS + 3 requests. (Kills ``self._probe_after * 2`` ->
    ``* 2 + 1`` in AnthropicConsolidator.consolidate: probes at 10, 21, 44.)"""
    from memlife.embed import default_embedder

    messages_server.set_handler(lambda body: DOWN)
    c = _make(messages_server, default_embedder())
    _send(c, 4 * 2 * OUTAGE_CALLS)
    assert len(messages_server.message_requests) == OUTAGE_CALLS + 3


def test_an_answer_resets_the_probe_schedule(messages_server) -> None:
    """An outage, a probe the service answers, then a second outage: the second outage's
    probe comes after OUTAGE_CALLS held back again, not after the doubled count. (Kills
    dropping ``self._held, self._probe_after = 0, OUTAGE_CALLS`` after an answer.)"""
    from memlife.embed import default_embedder

    messages_server.enqueue(*([DOWN] * OUTAGE_CALLS), OK, *([DOWN] * OUTAGE_CALLS))
    messages_server.set_handler(lambda body: DOWN)
    c = _make(messages_server, default_embedder())
    _send(c, 4 * OUTAGE_CALLS)  # 5 sent, 4 held, probe (answered); 5 sent, 4 held, probe
    assert c.answered
    assert len(messages_server.message_requests) == 2 * OUTAGE_CALLS + 2


def test_a_lease_on_another_store_does_not_refuse_a_second_thread(tmp_path) -> None:
    """One thread holds the lease of store A; another thread of the process takes store B's:
    it is B's own lease, granted and given back. (Kills ``_same_store`` matching any held
    lease: ``if h.store == store`` dropped, in memlife/lease.py.)"""
    import threading

    from memlife.lease import for_store
    from memlife.stores.sqlite import SqliteStore

    one, two = SqliteStore(tmp_path / "a.db"), SqliteStore(tmp_path / "b.db")
    got: list[object] = []

    def other() -> None:
        lease = for_store(two, "run-2", "nightly")
        got.append(lease.run_id)
        lease.release()

    try:
        outer = for_store(one, "run-1", "nightly")
        t = threading.Thread(target=other)
        t.start()
        t.join(60)
        outer.release()
        assert got == ["run-2"]
    finally:
        one.close()
        two.close()


def test_a_line_of_control_characters_at_the_content_limit_is_in_bound() -> None:
    """A record whose content is content_max control characters exports as a JSON line
    six bytes a character: the default line bound must take it, so the store's own export
    imports again. (Kills ``6 * content_max`` -> ``1 * content_max`` in line_bound.)"""
    import json

    from memlife.import_lines import line_bound

    n = 500_000
    assert len(json.dumps({"content": "\x01" * n})) <= line_bound(n)


def _yaml(text: str) -> object:
    import yaml

    from memlife.policy import _UniqueKeyLoader

    return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader subclass)


@pytest.mark.parametrize("written", ["1:30", "-030", "+014", "0_30"])
def test_a_base_60_or_signed_or_underscored_zero_padded_int_is_refused(written: str) -> None:
    """The operator writes 1:30 (base 60 in YAML 1.1: 90), -030 / +014 (octal under a
    sign) or 0_30 (octal with a separator): refused, not read in another base. (Kills
    dropping ``":" in digits`` and the ``.replace("_", "").lstrip("+-")`` normalisation
    in _UniqueKeyLoader.construct_yaml_int.)"""
    import yaml

    with pytest.raises(yaml.constructor.ConstructorError):
        _yaml(f"days: {written}")


def test_zero_and_hex_are_read_as_written() -> None:
    """A plain 0 and a 0x number mean what they say: read, not refused. (Kills
    ``len(digits) > 1`` -> ``> 0`` and dropping ``digits[1].isdigit()``.)"""
    assert _yaml("days: 0") == {"days": 0}
    assert _yaml("days: 0x1e") == {"days": 30}


def test_the_state_ttl_bound_is_a_hundred_years_exactly() -> None:
    """``ttl_days=36500`` (the documented most) parses; one day more is refused naming
    ttl_days. (Kills ``ttl_days > 36_500`` -> ``> 36_501`` / ``>= 36_500`` in
    memlife/state/__init__.py::parse_state_url.)"""
    from memlife.state import StateSettingsError, parse_state_url

    url = "dynamodb://memlife-state?region=us-east-1&parquet=s3://b/p"
    parsed = parse_state_url(url + "&ttl_days=36500")
    assert parsed is not None and parsed.ttl_days == 36_500
    with pytest.raises(StateSettingsError, match="ttl_days"):
        parse_state_url(url + "&ttl_days=36501")


def test_the_texts_a_json_item_carries_are_tombstoned_and_no_others() -> None:
    """An erased LangGraph JSON item's free texts (four words or more since audit 44i, at
    any depth, in lists too) get tombstones of their own; a shorter value does not, nor
    does the JSON text of a record that is no LangGraph item. (Kills dropping the
    ``langgraph:json:`` check, ``len(v.split()) > 3`` -> ``> 2`` / ``> 4`` and not
    descending into lists, in memlife/tombstones.py::_carried_texts.)"""
    from memlife.model import MemoryRecord, content_sha256
    from memlife.tombstones import rows_for
    from tests.support.records import good

    content = '{"a": "drinks black coffee daily", "b": ["one two three four five"], "c": "in progress", "d": "one two three"}'
    item = good("m-1", content=content)
    item["provenance"] = {**item["provenance"], "source_event": "langgraph:json:prefs"}
    plain = good("m-2", content=content)
    shas = {r.id: {row[2] for row in rows_for([r])} for r in map(MemoryRecord.model_validate,
                                                                  (item, plain))}  # fmt: skip
    carried = {
        content_sha256("drinks black coffee daily"),
        content_sha256("one two three four five"),
    }
    assert shas["m-1"] == {content_sha256(content)} | carried
    assert shas["m-2"] == {content_sha256(content)}


def test_a_list_filter_needs_a_list_of_its_length() -> None:
    """As InMemoryStore: a list filter matches only a list (or tuple) equal item by item; a
    longer list or a string of those characters does not match, and nothing raises. (Kills
    dropping ``len(value) == len(expected)`` (zip strict raised) and
    ``isinstance(value, list | tuple)`` in langgraph_filters.matches.)"""
    from memlife.integrations.langgraph_filters import matches

    assert matches(("a", "b"), ["a", "b"])
    assert not matches(["a", "b"], ["a"])
    assert not matches("ab", ["a", "b"])


@pytest.fixture(autouse=True)
def _no_stray_fault(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMLIFE_FAULT", raising=False)
