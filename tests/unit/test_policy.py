"""Policy files: loading, versioning, and errors that name the offending key."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from memlife.model import MemoryType, Source
from memlife.policy import Policy, PolicyError, load_policy

REPO = Path(__file__).resolve().parents[2]
DEFAULT = REPO / "policies" / "default.yaml"
ROLLOUT = REPO / "policies" / "rollout-example.yaml"


def _default() -> dict:
    return yaml.safe_load(DEFAULT.read_text())


def _write(tmp_path: Path, data: dict | str) -> Path:
    p = tmp_path / "policy.yaml"
    p.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return p


def test_default_policy_loads_complete() -> None:
    p = load_policy(DEFAULT)
    assert isinstance(p, Policy)
    assert p.version == _default()["version"]
    assert set(p.memory_types) == set(MemoryType)
    assert set(p.source_weights) == set(Source)
    # the policy's own promise: agent inference is the weakest source
    assert min(p.source_weights, key=p.source_weights.get) is Source.agent_inferred


def test_default_policy_found_without_a_path(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)  # not the repository: falls back to the shipped copy
    assert load_policy().version == _default()["version"]


def test_rollout_example_enforces_deletion_only_for_episodes() -> None:
    p = load_policy(ROLLOUT)
    assert p.version != load_policy(DEFAULT).version
    assert p.deletion_enforced("/users/u-000001/episodes")
    for ns in (
        "/users/u-000001/preferences",
        "/users/u-000001/facts",
        "/users/u-000001/procedures",
        "/users/u-000001/support",
        "/teams/x/episodes",
    ):
        assert not p.deletion_enforced(ns), ns


def test_default_enforces_the_demo_namespaces() -> None:
    p = load_policy(DEFAULT)
    for leaf in ("preferences", "facts", "episodes", "procedures", "support"):
        assert p.deletion_enforced(f"/users/u-1/{leaf}")
    assert not p.deletion_enforced("/orgs/o-1/preferences")
    assert not p.deletion_enforced("/users/u-1/preferences/extra")  # globs anchor at both ends


def test_bad_yaml(tmp_path: Path) -> None:
    p = _write(tmp_path, "version: '1'\nmemory_types: [unclosed\n")
    with pytest.raises(PolicyError, match="not valid YAML") as info:
        load_policy(p)
    assert str(p) in str(info.value)


def test_not_a_mapping(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="mapping"):
        load_policy(_write(tmp_path, "- a\n- b\n"))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="not found"):
        load_policy(tmp_path / "nope.yaml")


@pytest.mark.parametrize("name", ["default.yaml", "rollout-example.yaml"])
def test_a_missing_policy_named_like_a_shipped_one_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """my-team/default.yaml missing must not run silently under the bundled default."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(PolicyError, match="not found"):
        load_policy(tmp_path / "my-team" / name)
    assert load_policy(f"policies/{name}").version  # the shipped names still fall back


def test_a_key_written_twice_is_an_error_naming_it(tmp_path: Path) -> None:
    """PyYAML keeps the last of two equal keys: a second enforce_deletion_in further down
    would silently turn deletion off."""
    text = DEFAULT.read_text() + "\nenforce_deletion_in: []\n"
    with pytest.raises(PolicyError, match="enforce_deletion_in") as info:
        load_policy(_write(tmp_path, text))
    assert "repeated" in str(info.value)
    nested = "version: '1'\nlimits:\n  content_max_bytes: 10\n  content_max_bytes: 20\n"
    with pytest.raises(PolicyError, match="content_max_bytes"):
        load_policy(_write(tmp_path, nested))


@pytest.mark.parametrize(
    ("mutate", "key"),
    [
        (lambda d: d.update(verion="x"), "verion"),
        (
            lambda d: d["memory_types"]["semantic"].update(low_scroe=0.1),
            "memory_types.semantic.low_scroe",
        ),
        (lambda d: d["grouping"].update(max_group=3), "grouping.max_group"),
        (
            lambda d: d["memory_types"]["semantic"]["weights"].update(recency=0.1),
            "memory_types.semantic.weights.recency",
        ),
        (
            lambda d: d["memory_types"]["episodic"]["weights"].update(source=-0.5),
            "memory_types.episodic.weights.source",
        ),
        (
            lambda d: d["memory_types"]["episodic"]["weights"].update(source="heavy"),
            "memory_types.episodic.weights.source",
        ),
        (
            lambda d: d["memory_types"]["procedural"].update(low_score=1.5),
            "memory_types.procedural.low_score",
        ),
        (
            lambda d: d["memory_types"]["semantic"]["half_life_days"].update(creation=0),
            "memory_types.semantic.half_life_days.creation",
        ),
        (lambda d: d.pop("version"), "version"),
        (lambda d: d.update(contradiction_penalty=2), "contradiction_penalty"),
        # adversarial review, second round: each of these was accepted
        (
            lambda d: d["memory_types"]["episodic"]["weights"].update(creation_recency=35),
            "memory_types.episodic.weights.creation_recency",
        ),
        (
            lambda d: d["memory_types"]["episodic"]["weights"].update(frequency=1e308),
            "memory_types.episodic.weights.frequency",
        ),
        (
            lambda d: d["superseded_retention_days"].update(standard=-90),
            "superseded_retention_days.standard",
        ),
        (
            lambda d: d["review"]["type_priority"].update(procedural=-1.0),
            "review.type_priority.procedural",
        ),
        (lambda d: d["gate"].update(replicas=100_000_000), "gate.replicas"),
    ],
    ids=[
        "unknown top key",
        "unknown type key",
        "unknown grouping key",
        "unknown weight",
        "negative weight",
        "weight not a number",
        "threshold out of range",
        "zero half-life",
        "missing version",
        "penalty out of range",
        "weight over 1 (35 for 0.35)",
        "weight that overflows",
        "negative superseded retention",
        "negative review priority",
        "replicas without bound",
    ],
)
def test_invalid_policy_names_the_key(tmp_path: Path, mutate, key: str) -> None:
    data = _default()
    mutate(data)
    p = _write(tmp_path, data)
    with pytest.raises(PolicyError) as info:
        load_policy(p)
    assert f"key '{key}'" in str(info.value)
    assert str(p) in str(info.value)


def test_missing_memory_type_is_named(tmp_path: Path) -> None:
    data = _default()
    del data["memory_types"]["procedural"]
    with pytest.raises(PolicyError) as info:
        load_policy(_write(tmp_path, data))
    assert "memory_types" in str(info.value)
    assert "procedural" in str(info.value)


def test_missing_source_weight_is_named(tmp_path: Path) -> None:
    data = _default()
    del data["source_weights"]["agent_inferred"]
    with pytest.raises(PolicyError) as info:
        load_policy(_write(tmp_path, data))
    assert "source_weights" in str(info.value)
    assert "agent_inferred" in str(info.value)


def test_unknown_memory_type_is_named(tmp_path: Path) -> None:
    data = _default()
    data["memory_types"]["semantik"] = data["memory_types"]["semantic"]
    with pytest.raises(PolicyError) as info:
        load_policy(_write(tmp_path, data))
    assert "memory_types.semantik" in str(info.value)


def test_all_zero_weights_rejected(tmp_path: Path) -> None:
    data = _default()
    data["memory_types"]["semantic"]["weights"] = {
        k: 0 for k in data["memory_types"]["semantic"]["weights"]
    }
    with pytest.raises(PolicyError) as info:
        load_policy(_write(tmp_path, data))
    assert "memory_types.semantic.weights" in str(info.value)
    assert "positive" in str(info.value)


def test_policy_is_frozen() -> None:
    p = load_policy(DEFAULT)
    with pytest.raises(Exception):  # noqa: B017 - pydantic raises ValidationError on frozen models
        p.version = "other"  # type: ignore[misc]


# Issue 12, case 6: YAML's `yes`, strings and booleans are not numbers; weights are 0..1.
@pytest.mark.parametrize(
    ("text", "key"),
    [
        (
            "memory_types:\n  episodic:\n    default_ttl_days: yes\n",
            "memory_types.episodic.default_ttl_days",
        ),
        (
            'memory_types:\n  episodic:\n    default_ttl_days: "30"\n',
            "memory_types.episodic.default_ttl_days",
        ),
        ("memory_types:\n  semantic:\n    low_score: true\n", "memory_types.semantic.low_score"),
        ("source_weights:\n  agent_inferred: -0.4\n", "source_weights.agent_inferred"),
        ("source_weights:\n  agent_inferred: 4\n", "source_weights.agent_inferred"),
        ("grouping:\n  max_group_size: 12.5\n", "grouping.max_group_size"),
        ("grouping:\n  max_group_size: '12'\n", "grouping.max_group_size"),
        ("pending_delete_grace_days: .inf\n", "pending_delete_grace_days"),
        ("limits:\n  content_max_bytes: 0\n", "limits.content_max_bytes"),
        ("version: 3\n", "version"),
    ],
    ids=[
        "ttl yes",
        "ttl string",
        "low_score bool",
        "negative source weight",
        "weight over 1",
        "fractional int",
        "int as string",
        "infinite grace",
        "zero content bound",
        "version number",
    ],
)
def test_strict_types_name_the_key(tmp_path: Path, text: str, key: str) -> None:
    data = _default()
    _merge(data, yaml.safe_load(text))
    p = _write(tmp_path, data)
    with pytest.raises(PolicyError) as info:
        load_policy(p)
    assert f"key '{key}'" in str(info.value)


def _merge(into: dict, patch: dict) -> None:
    for k, v in patch.items():
        if isinstance(v, dict) and isinstance(into.get(k), dict):
            _merge(into[k], v)
        else:
            into[k] = v


def test_integers_are_still_numbers(tmp_path: Path) -> None:
    data = _default()
    data["memory_types"]["episodic"]["default_ttl_days"] = 30
    assert (
        load_policy(_write(tmp_path, data)).memory_types[MemoryType.episodic].default_ttl_days == 30
    )


def test_namespace_globs_match_whole_segments() -> None:
    pol = load_policy(DEFAULT)
    assert pol.deletion_enforced("/users/u1/facts")
    assert not pol.deletion_enforced("/users/u1/../../compliance/facts")
    assert not pol.deletion_enforced("/users/u1/x/facts")
    deep = pol.model_copy(update={"enforce_deletion_in": ["/users/**/facts"]})
    assert deep.deletion_enforced("/users/a/b/facts") and deep.deletion_enforced("/users/facts")
    assert not deep.deletion_enforced("/users/a/./facts")


def test_the_fingerprint_is_the_policy_as_parsed_not_the_file(tmp_path: Path) -> None:
    base = load_policy(DEFAULT)
    data = _default()
    data["gate"]["aggregate_score_min"] = 0.5  # a threshold edited, version left as it was
    edited = load_policy(_write(tmp_path, data))
    assert edited.version == base.version and edited.fingerprint() != base.fingerprint()
    relaid = tmp_path / "relaid.yaml"
    relaid.write_text("# a comment\n" + Path(DEFAULT).read_text().replace(": ", ":   "))
    assert load_policy(relaid).fingerprint() == base.fingerprint()
    # a copy with an update is another policy (nothing stale carried over by model_copy)
    copied = base.model_copy(update={"contradiction_penalty": 0.5})
    assert copied.fingerprint() != base.fingerprint()


def test_a_policy_edited_under_the_same_version_is_another_run() -> None:
    from datetime import UTC, datetime

    from memlife.run_start import run_key

    base = load_policy(DEFAULT)
    edited = base.model_copy(update={"contradiction_penalty": 0.5})
    now = datetime(2026, 12, 1, tzinfo=UTC)
    args = (now, {"namespaces": [], "actors": []}, "dry_run", "sqlite:x")
    assert run_key(base, *args) == run_key(load_policy(DEFAULT), *args)
    assert run_key(edited, *args) != run_key(base, *args)


@pytest.mark.parametrize(
    "glob", ["users/*/episodes", "/users/*/episodes ", "/users/../episodes", "", "/users//episodes"]
)
def test_an_enforcement_glob_no_namespace_could_match_is_named(tmp_path: Path, glob: str) -> None:
    """Adversarial review: a typo in an enforce_deletion_in glob matched nothing, silently
    taking the namespace out from under enforcement (and turning on ungated supersedes)."""
    data = _default()
    data["enforce_deletion_in"] = ["/users/*/facts", glob]
    with pytest.raises(PolicyError, match="enforce_deletion_in") as info:
        load_policy(_write(tmp_path, data))
    assert "no namespace glob" in str(info.value)


def test_a_default_policy_in_the_working_directory_is_said_when_it_is_not_memlifes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Session 29 "Left": `--policy` defaults to policies/default.yaml, read against the
    working directory first, so another project's file of that name won silently wherever
    the command ran. It is still used (a path is a path), and said once; memlife's own copy
    (the repository's, run from it) says nothing."""
    import memlife.policy as policy_mod

    shipped = Path("policies/default.yaml").resolve()
    (tmp_path / "policies").mkdir()
    own = tmp_path / "policies" / "default.yaml"
    own.write_text(
        shipped.read_text().replace("pending_delete_grace_days: 7", "pending_delete_grace_days: 1")
    )
    monkeypatch.chdir(tmp_path)
    policy_mod._say_if_not_shipped.cache_clear()
    with caplog.at_level("WARNING", logger="memlife.policy"):
        assert load_policy().pending_delete_grace_days == 1  # used
        load_policy()
    said = [r for r in caplog.records if "working directory" in r.getMessage()]
    assert len(said) == 1 and str(own) in said[0].getMessage()

    caplog.clear()
    own.write_bytes(shipped.read_bytes())  # the same rules: nothing to say
    policy_mod._say_if_not_shipped.cache_clear()
    with caplog.at_level("WARNING", logger="memlife.policy"):
        load_policy()
    assert not [r for r in caplog.records if "working directory" in r.getMessage()]
