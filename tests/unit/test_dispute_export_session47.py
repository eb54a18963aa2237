"""Session 47 (audit 47m): `export --erasures` (memlife/dispute_export.py) of a dispute whose reviewer
identity the review CLI accepted as given, through the real `memlife` CLI on SQLite."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from memlife.cli import app
from tests.support.records import good
from tests.unit.test_import_export import write_jsonl
from tests.unit.test_roundtrip_session47 import _night, _ok, runner  # noqa: F401 (fixture)


# fmt: skip
def test_a_dispute_by_a_long_reviewer_identity_is_exported_and_carried(
    home: Path,
    tmp_path: Path,
    runner: CliRunner,  # noqa: F811
) -> None:
    """A reviewer disputes an item under a long identity (an X.509 subject or a federated
    ARN with its session name: 300 characters), which `review resolve` accepts and
    receipts. The operator then migrates as README says. Must hold: `export --erasures`
    writes the dispute (no crash, no dispute lost) and `import --erasures` carries it."""
    old, new = f"sqlite:///{tmp_path / 'old.db'}", f"sqlite:///{tmp_path / 'new.db'}"
    src = write_jsonl(tmp_path / "a.jsonl", [json.dumps(good(
        "m-1", memory_type="procedural", namespace="/users/u-1/procedures", subject="deploy",
        owner=None, created_at="2026-11-01T00:00:00Z", last_verified_at="2026-11-01T00:00:00Z",
    ))])  # fmt: skip
    _ok(runner, "import", str(src), "--store", old)
    _night(runner, old, "2026-11-02T00:00:00Z")  # a procedure without an owner: reviewed
    (item,) = json.loads(_ok(runner, "review", "list", "--store", old, "--json"))
    who = "CN=" + "ana.reviewer," * 23 + "O=example"  # 311 characters
    _ok(runner, "review", "resolve", item["item_id"], "--decision", "dispute",
        "--reviewer", who, "--store", old)  # fmt: skip
    files = [str(tmp_path / n) for n in ("all.jsonl", "e.jsonl")]
    res = runner.invoke(app, ["export", "--store", old, "-o", files[0], "--erasures", files[1]])
    assert res.exit_code == 0, res.output
    _ok(runner, "import", files[0], "--store", new, "--erasures", files[1])
    (carried,) = json.loads(_ok(runner, "review", "list", "--store", new, "--json"))
    assert (carried["state"], carried["reviewer"]) == ("disputed", who)
