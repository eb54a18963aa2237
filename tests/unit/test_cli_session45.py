"""Session 45 (audit 45h): the operator's CLI as a careless operator and a cron job use it (Ctrl-C at a
fixed point through a real SIGINT, reruns, the retry queue that finishes what a command left)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memlife.model import MemoryRecord
from memlife.stores.sqlite import SqliteStore
from tests.conftest import REPO
from tests.support.cli import invoke
from tests.support.records import good

IDS = [f"m-{i:03d}" for i in range(101)]  # two batches of updates (MAX_BATCH is 100)


def _lines(path: Path, owner: str) -> Path:
    path.write_text("".join(json.dumps(good(i, owner=owner)) + "\n" for i in IDS))
    return path


def _interrupt(home: Path, *args: str, point: str) -> subprocess.CompletedProcess[str]:
    """``memlife ARGS`` in a subprocess, stopped at ``point`` and sent SIGINT (Ctrl-C)."""
    mark = home.parent / "at-fault"
    env = {**os.environ, "MEMLIFE_FAULT": point, "MEMLIFE_FAULT_MODE": "hang",
           "MEMLIFE_FAULT_MARK": str(mark), "NO_COLOR": "1", "TERM": "dumb"}  # fmt: skip
    proc = subprocess.Popen([sys.executable, "-m", "memlife", *args], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    deadline = time.monotonic() + 120
    while not mark.exists():  # the command stands at the fault point
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert time.monotonic() < deadline, "the command never reached its fault point"
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_an_interrupted_import_update_is_not_replayed_over_a_later_one(
    home: Path, tmp_path: Path
) -> None:
    """The operator starts `import A --update` and hits Ctrl-C part way (the first batch
    written, the second planned), then imports the corrected file B with --update: every
    record now holds B, receipted. The cron's `run --retry-only` must not then write A's
    stale lines back over B (invariant 10: a change re-checks its precondition against the
    record as it is now); it wrote the planned one back, receipted as A's `updated`."""
    home.mkdir(parents=True)
    with SqliteStore(home / "memlife.db") as store:
        store.put_many([MemoryRecord.model_validate(good(i)) for i in IDS])
    file_a, file_b = _lines(tmp_path / "a.jsonl", "team-a"), _lines(tmp_path / "b.jsonl", "team-b")

    stopped = _interrupt(home, "import", str(file_a), "--update", point="before_receipt")
    assert stopped.returncode == 130 and "Traceback" not in stopped.stderr, stopped.stderr

    code, out, err = invoke("import", str(file_b), "--update", "--json")
    assert code == 0 and json.loads(out)["updated"] == len(IDS), err
    code, out, err = invoke("run", "--retry-only", "--json")
    assert code in (0, 3), err  # 3: the interrupted request's rest refused, named as failed
    with SqliteStore(home / "memlife.db") as store:
        owners = {i: r.owner for i in IDS if (r := store.get(i)) is not None}
    assert set(owners.values()) == {"team-b"}, {i: o for i, o in owners.items() if o != "team-b"}


def test_an_interrupted_hold_release_is_not_replayed_over_a_later_hold_place(home: Path) -> None:
    """The operator runs `hold release` on the wrong two records (held past their
    `expires_at`) and hits Ctrl-C after the first is released, then puts the holds back with
    `hold place` (receipted). The next `memlife run` must leave both held and in the store
    (invariant 1); its retry queue lifted both holds and the same night deleted them."""
    home.mkdir(parents=True)
    held = [good(i, retention_class="legal_hold", expires_at="2026-02-01T00:00:00Z")
            for i in ("m-a", "m-b")]  # fmt: skip
    with SqliteStore(home / "memlife.db") as store:
        store.put_many([MemoryRecord.model_validate(r) for r in held])

    args = ("hold", "release", "--id", "m-a", "--id", "m-b")
    stopped = _interrupt(home, *args, point="after_supersede")
    assert stopped.returncode == 130 and "Traceback" not in stopped.stderr, stopped.stderr

    code, out, err = invoke("hold", "place", "--id", "m-a", "--id", "m-b", "--json")
    assert code == 0 and sorted(json.loads(out)["held"]) == ["m-a", "m-b"], err
    code, out, err = invoke("run", "--json")
    assert code in (0, 3), err  # 3: the interrupted request's rest refused, named as failed
    with SqliteStore(home / "memlife.db") as store:
        classes = {i: r.retention_class.value if (r := store.get(i)) else None
                   for i in ("m-a", "m-b")}  # fmt: skip
    assert classes == {"m-a": "legal_hold", "m-b": "legal_hold"}


def test_a_history_of_nothing_exits_1_with_json_as_without(home: Path) -> None:
    """A cron script asks `receipts history RECORD_ID --json` for a record no receipt names.
    The table says "no operation on ... in the receipts" and exits 1; README: "Exit codes are
    the same with --json". With --json it printed [] and exited 0, as a found history does."""
    home.mkdir(parents=True)
    with SqliteStore(home / "memlife.db") as store:
        store.put_many([MemoryRecord.model_validate(good("m-1"))])
    code, out, err = invoke("hold", "place", "--id", "m-1")  # receipts exist, none of m-2
    assert code == 0, err
    table = invoke("receipts", "history", "m-2")
    assert table[0] == 1 and "no operation on m-2" in table[2]
    code, out, err = invoke("receipts", "history", "m-2", "--json")
    assert json.loads(out) == [] and "Traceback" not in err
    assert code == table[0]


def _readme_commands() -> list[list[str]]:
    """README "Using it": the bash block's memlife lines, each without its comment."""
    import shlex

    text = (REPO / "README.md").read_text()
    block = text.split("## Using it", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    return [
        shlex.split(ln, comments=True) for ln in block.splitlines() if ln.startswith("memlife ")
    ]


def test_readmes_first_commands_run_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new operator copies README's "Using it" block line by line into a fresh folder
    (no MEMLIFE_* set): the demo, then the dry run, must both exit 0. Only the demo's size
    is cut (10000 -> 200 records) to keep the test short; the store flags are as written."""
    for var in ("MEMLIFE_HOME", "MEMLIFE_STORE", "MEMLIFE_RECEIPTS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)
    demo, dry = _readme_commands()[:2]
    assert demo[:2] == ["memlife", "demo"] and dry == ["memlife", "run", "--dry-run", "--json"]
    demo = [("200" if a == "10000" else a) for a in demo]
    code, _, err = invoke(*demo[1:])
    assert code == 0, err
    code, out, err = invoke(*dry[1:])
    assert code == 0, err
    assert json.loads(out)["records"] == 200
