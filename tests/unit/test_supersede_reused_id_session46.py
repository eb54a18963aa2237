"""Session 46 (audit 46k): superseded retention must count from the supersede of THIS record, also when
its id was freed and taken again in the same actor and namespace (audit 46g held only the
other-namespace case)."""

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


def test_an_erased_records_supersede_does_not_delay_its_reused_ids_retention(
    home: Path, tmp_path: Path
) -> None:
    """The adversary lets tonight's night supersede u-1's m-old, erases it (the id is free),
    then imports into the SAME namespace another record under m-old, superseded 200 days ago.
    The standard class keeps a superseded record 90 days: the next night must delete it; the
    erased record's supersede (hours ago) is no supersede of this one."""
    now = utcnow()
    old = (now - 150 * DAY).isoformat()
    ns = "/users/u-1/facts"
    _import(tmp_path / "a.jsonl", [
        good("m-old", namespace=ns, content="Drinks only green tea, never coffee.",
             created_at=old, last_verified_at=old),
        good("m-new", namespace=ns, content="Switched to black coffee; no longer drinks tea.",
             created_at=(now - 10 * DAY).isoformat(), last_verified_at=(now - 10 * DAY).isoformat()),
    ])  # fmt: skip
    policy = policy_with(tmp_path, required=False)
    run_local(RunConfig(dry_run=False, now=now, policy=policy))
    assert statuses(home)["m-old"] == "superseded"
    code, out, err = invoke("erase", "--actor", "u-1", "--id", "m-old", "--yes", "--policy", policy)
    assert code == 0, (out, err)
    assert "m-old" not in statuses(home)
    _import(tmp_path / "b.jsonl", [
        good("f-porto", namespace=ns, subject="city", content="Lives in Porto.",
             created_at=old, last_verified_at=old),
        good("m-old", namespace=ns, subject="city", content="Lives in Lisbon.",
             # created after the erasure: dated before it, an id's record is the erased
             # record itself under an older text (refused since audit 49vi)
             created_at=utcnow().isoformat(), status="superseded",
             status_changed_at=(now - 200 * DAY).isoformat(),
             provenance={**good("x")["provenance"], "replaced_by": "f-porto"}),
    ])  # fmt: skip
    night = run_local(RunConfig(dry_run=False, now=utcnow(), policy=policy))
    assert "m-old" not in statuses(home), night.counts
