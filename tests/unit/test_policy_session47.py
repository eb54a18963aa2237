"""Session 47 (audit 47l): policy files as an adversary and a careless operator.

Each test edits a copy of the shipped default policy the way an operator would (a longer
version, an owner rule's placeholder, an editor saving while a run starts, globs of
repeated ``**``) and runs the real loader, the real CLI or the run's real start.
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from memlife import namespaces
from memlife.policy import PolicyError, load_policy
from memlife.policy_record import _rules, _rules_of, policy_key
from memlife.run_start import start_run
from memlife.run_types import RunConfig
from memlife.stores.sqlite import SqliteStore
from tests.support.cli import invoke
from tests.support.records import good

REPO = Path(__file__).resolve().parents[2]
DEFAULT = REPO / "policies" / "default.yaml"
NOW = datetime(2026, 11, 1, 12, tzinfo=UTC)


def _policy(tmp_path: Path, name: str, version: str, *, ttl_days: int | None = None) -> Path:
    text = re.sub(r"(?m)^version: .*$", f'version: "{version}"', DEFAULT.read_text(), count=1)
    if ttl_days is not None:
        text = re.sub(r"default_ttl_days: \d+", f"default_ttl_days: {ttl_days}", text)
    path = tmp_path / name
    path.write_text(text)
    return path


def _manifests(home: Path) -> list[Path]:
    return list((home / "receipts").rglob("manifest.json"))


def test_a_version_too_long_for_its_kept_file_is_refused_naming_the_key(
    home: Path, tmp_path: Path
) -> None:
    """A careless operator writes a descriptive version: 34 CJK characters (310 bytes once
    quoted for `policies/{version}.yaml`). The dry run passes, the apply run dies with
    "OSError: File name too long" (exit 1). Both must be refused as an invalid policy
    (exit 2, README), naming `version`, before anything is written."""
    src = tmp_path / "r.jsonl"
    src.write_text(json.dumps(good("m-1", content="Likes green tea.", subject="tea")) + "\n")
    assert invoke("import", str(src))[0] == 0
    path = _policy(
        tmp_path, "p.yaml", "2026年11月默认策略第四版记忆生命周期数据保留规则修订和审计说明"
    )
    for extra in (["--dry-run"], []):
        code, out, err = invoke("run", "--engine", "local", "--policy", str(path), *extra)
        assert code == 2, (extra, out + err)
        assert "version" in err, err
    assert _manifests(home) == []


@pytest.mark.parametrize("owner", ["{actor_id}", "{user}", "{Actor}", " "])
def test_an_owner_rule_with_a_mistyped_placeholder_or_a_blank_owner_is_refused(
    tmp_path: Path, owner: str
) -> None:
    """The operator writes `owner: "{actor_id}"` (or `{user}`, or a blank) for a user-owned
    tree. The loader keeps it as the literal text, `Policy.owner_for` hands it to every
    ownerless record there, and the planner's MISSING_OWNER review never fires (a blank
    owner on a record is missing; from a rule it is an owner). MEMLIFE_NAMESPACE refuses a
    `{user}` placeholder since session 27; the policy must refuse it too, naming the key."""
    data = yaml.safe_load(DEFAULT.read_text())
    data["owners"] = [{"namespace": "/users/*/**", "owner": owner}]
    path = tmp_path / "owners.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(PolicyError, match=r"key 'owners\.0\.owner'"):
        load_policy(path)


def test_the_kept_policy_and_its_digest_are_the_rules_the_run_applied(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An editor (or a deploy job) saves the policy file, the same version with every TTL
    at one day, just after the run has read it. The run applies the rules it read; the
    receipts must keep those rules (or refuse the run before its manifest): the kept
    `policies/{version}.yaml` and the manifest's `policy_sha256` name what was applied,
    else the next run under the applied rules is refused and the edited one is taken."""
    version = "2026.12-audit47l"
    path = _policy(tmp_path, "p.yaml", version)
    edited = _policy(tmp_path, "edited.yaml", version, ttl_days=1).read_bytes()
    SqliteStore(home / "memlife.db").close()
    saved: list[bool] = []

    def saving_after(read):  # the file is saved once, right after the run's first read
        def wrapped(self: Path, *args, **kwargs):
            out = read(self, *args, **kwargs)
            if self == path and not saved:
                saved.append(True)
                path.write_bytes(edited)
            return out

        return wrapped

    monkeypatch.setattr(Path, "read_text", saving_after(Path.read_text))
    monkeypatch.setattr(Path, "read_bytes", saving_after(Path.read_bytes))
    try:
        ctx = start_run(RunConfig(dry_run=False, now=NOW, policy=str(path)))
    except PolicyError:  # refused: then nothing may have been written
        assert _manifests(home) == []
        return
    monkeypatch.undo()
    kept = (home / "receipts" / policy_key(version)).read_bytes()
    assert _rules(kept) == _rules_of(ctx.policy)  # the rules applied are the rules kept
    (manifest,) = _manifests(home)
    sha = json.loads(manifest.read_text())["policy_sha256"]
    assert sha == hashlib.sha256(kept).hexdigest()


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls = [0]
    real = namespaces.fnmatchcase

    def counted(name: str, pat: str) -> bool:
        calls[0] += 1
        return real(name, pat)

    monkeypatch.setattr(namespaces, "fnmatchcase", counted)
    return calls


def test_repeated_double_stars_are_matched_in_polynomial_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The adversary writes `**` six times before a last segment, in `enforce_deletion_in`
    and in an owners rule, and an owners rule of a deep namespace after it. Segment
    comparisons must stay within (glob segments + 1) x (namespace segments + 1), for the
    night's match and for the loader's check that a later owners rule can apply; the
    buggy recursion tries every way to split the namespace among the `**` (tens of
    thousands of comparisons here, hours of CPU at 14 of them: the loader never returns)."""
    glob = "/" + "/".join(["**"] * 6) + "/zz"
    deep = "/" + "/".join(f"a47l{i}" for i in range(16))
    bound = (glob.count("/") + 1) * (deep.count("/") + 1)
    calls = _counting(monkeypatch)
    assert not namespaces.glob_match(glob, deep)
    assert calls[0] <= bound, calls[0]

    data = yaml.safe_load(DEFAULT.read_text())
    data["owners"] = [
        {"namespace": glob, "owner": "team-a"},
        {"namespace": deep + "/yy", "owner": "team-b"},
    ]
    path = tmp_path / "stars.yaml"
    path.write_text(yaml.safe_dump(data))
    calls[0] = 0
    assert load_policy(path).owner_for("u-1", deep + "/yy", "semantic") == "team-b"
    assert calls[0] <= bound, calls[0]


def test_an_enforcement_glob_matching_one_of_several_namespaces_is_not_named(home: Path) -> None:
    """Weak-test guard (``Policy.unmatched_enforcement``'s ``any``): a store of two
    namespaces, /users/u-1/episodes and /users/u-1/facts. An unscoped dry run names only
    the default policy's globs that match none of them; a glob matching one namespace of
    the store is no typo, whatever the other namespaces are (read as "matches every
    namespace", each glob here would be named and the warning mean nothing)."""
    from memlife.model import MemoryRecord
    from memlife.pipeline import run_local

    with SqliteStore(home / "memlife.db") as store:
        store.put_many([
            MemoryRecord(id=f"m-{i}", actor_id="u-1", namespace=f"/users/u-1/{leaf}",
                         memory_type="semantic", content=f"Fact {i}.", owner="team-a",
                         created_at=datetime(2026, 10, 5, tzinfo=UTC))
            for i, leaf in enumerate(("episodes", "facts"))
        ])  # fmt: skip
    other = run_local(RunConfig(dry_run=True, now=NOW)).other
    named = {k.split(":", 1)[1] for k in other if k.startswith("enforcement_glob_unmatched:")}
    assert named == {"/users/*/preferences", "/users/*/procedures", "/users/*/support"}
