"""Session 46 (audit 46g): superseded retention must count from the supersede of THIS record, not from
an operation of another namespace's record that once had its id.

``superseded_since.count_from_supersede`` asks the journal when each record was superseded
by record id alone (``read_supersede_times``: ``WHERE record_id IN (...)``, any actor or
namespace). A record id freed by an erasure in one namespace and taken in another (SQLite
allows it: the id is the whole key) then inherits the first record's supersede time.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from memlife.model import utcnow
from memlife.pipeline import RunConfig, run_local
from tests.support.cli import invoke
from tests.support.records import good
from tests.unit.test_gate_staged import policy_with, statuses

DAY = timedelta(days=1)


def _import(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, out, err = invoke("import", str(path))
    assert code == 0, (out, err)


def test_another_namespaces_supersede_of_a_reused_id_does_not_delay_retention(
    home: Path, tmp_path: Path
) -> None:
    """u-1's preference m-old is superseded by tonight's night, then erased (its id is
    free). u-1's facts namespace then receives a record under the id m-old, superseded 200
    days ago (an import from another system). The standard class keeps a superseded record
    90 days: the next night must delete it; the other namespace's supersede (hours ago)
    must not count for it."""
    now = utcnow()
    old = (now - 150 * DAY).isoformat()
    pref = "/users/u-1/preferences"
    _import(tmp_path / "a.jsonl", [
        good("m-old", namespace=pref, content="Drinks only green tea, never coffee.",
             created_at=old, last_verified_at=old),
        good("m-new", namespace=pref, content="Switched to black coffee; no longer drinks tea.",
             created_at=(now - 10 * DAY).isoformat(), last_verified_at=(now - 10 * DAY).isoformat()),
    ])  # fmt: skip
    policy = policy_with(tmp_path, required=False)  # the gate withholds no retention deletion
    run_local(RunConfig(dry_run=False, now=now, policy=policy))
    assert statuses(home)["m-old"] == "superseded"
    code, out, err = invoke("erase", "--actor", "u-1", "--id", "m-old", "--yes", "--policy", policy)
    assert code == 0, (out, err)
    facts = "/users/u-1/facts"
    stamp = (now - 200 * DAY).isoformat()
    _import(tmp_path / "b.jsonl", [
        good("f-porto", namespace=facts, subject="city", content="Lives in Porto.",
             created_at=old, last_verified_at=old),
        good("m-old", namespace=facts, subject="city", content="Lives in Lisbon.",
             # created after the erasure: dated before it, an id's record is the erased
             # record itself under an older text (refused since audit 49vi)
             created_at=utcnow().isoformat(), status="superseded",
             status_changed_at=stamp,
             provenance={**good("x")["provenance"], "replaced_by": "f-porto"}),
    ])  # fmt: skip
    night = run_local(RunConfig(dry_run=False, now=utcnow(), policy=policy))
    assert "m-old" not in statuses(home), night.counts
