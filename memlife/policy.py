"""The lifecycle policy: a versioned YAML file (policies/*.yaml) loaded into pydantic models.

Every decision the planner makes is a function of (record, policy, cutoff); the policy
version is written into manifests, receipts and changed records, so any change can be
traced to the rules that caused it. Unknown keys are errors: a typo must not silently
fall back to a default.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import unicodedata
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Annotated
from urllib.parse import quote

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    Strict,
    ValidationError,
    field_validator,
    model_validator,
)

from memlife.errors import PolicyError as PolicyError  # moved; re-exported
from memlife.model import MemoryType, RetentionClass, Source
from memlife.namespaces import glob_covers, glob_match

DEFAULT_POLICY = "policies/default.yaml"
log = logging.getLogger("memlife.policy")


# Strict scalars: YAML reads `yes` as true and `"30"` as a string; neither is a number here
# (lax pydantic would turn `default_ttl_days: yes` into a 1-day TTL). An int is a number.
Num = Annotated[float, Strict()]
Int = Annotated[int, Strict()]
Text = Annotated[str, Strict()]
Flag = Annotated[bool, Strict()]
Share = Annotated[float, Strict(), Field(ge=0, le=1)]
# Every span of days is at most 100 years: the planner turns them into timedeltas and dates
# (cutoff - days), which overflow long before a float does (keep_answers_days: 1000000 was
# accepted, then ended the run with a bare OverflowError); no retention rule needs more.
MAX_DAYS = 36_500
# A half-life is at least ~15 minutes: the decay rate is ln 2 / half-life, and a tiny one
# (1e-320) made it infinite and the scores NaN (an ArrowInvalid at the end of the run).
MIN_HALF_LIFE_DAYS = 0.01


def _namespace_glob(pattern: str) -> str:
    """A glob a namespace could match: "/seg/*/seg". A typo such as "users/*/episodes" (no
    leading slash), a stray space or a ".." segment matched nothing and took the namespace
    out from under enforcement, silently."""
    segments = pattern.split("/")
    if (
        pattern != pattern.strip()
        or not pattern.startswith("/")
        or any(seg in ("", ".", "..") for seg in segments[1:])
    ):
        raise ValueError(
            f"{pattern!r} is no namespace glob (a leading '/', no empty, '.' or '..' "
            "segment, no surrounding spaces)"
        )
    return pattern


# a policy glob checked as it loads: enforce_deletion_in and owners rules
NamespaceGlob = Annotated[str, Strict(), AfterValidator(_namespace_glob)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class ScoreWeights(_Strict):
    # each 0..1, as README promises: 35 for 0.35 (or 1e308, whose sums overflow to NaN
    # scores after records were deleted) is an error naming the key, not a new weighting
    creation_recency: Share
    access_recency: Share
    frequency: Share
    verification: Share
    source: Share
    confidence: Share = 0  # the record's own 0..1 confidence

    @model_validator(mode="after")
    def _some_weight(self) -> ScoreWeights:
        if sum(self.model_dump().values()) <= 0:
            raise ValueError("at least one weight must be positive")
        return self


class HalfLives(_Strict):
    creation: Num = Field(ge=MIN_HALF_LIFE_DAYS, le=MAX_DAYS)
    access: Num = Field(ge=MIN_HALF_LIFE_DAYS, le=MAX_DAYS)


class TypePolicy(_Strict):
    default_ttl_days: Num | None = Field(default=None, gt=0, le=MAX_DAYS)
    verification_stale_days: Num | None = Field(default=None, gt=0, le=MAX_DAYS)
    half_life_days: HalfLives
    frequency_scale: Num = Field(default=10, gt=0)
    weights: ScoreWeights
    low_score: Num = Field(ge=0, le=1)


class Grouping(_Strict):
    near_duplicate_cosine: Num = Field(default=0.88, gt=0, le=1)
    max_group_size: Int = Field(default=12, ge=2, le=100)
    grounding_cosine: Num = Field(default=0.55, gt=0, le=1)
    # an episodic statement repeated this often becomes one semantic record (with a model)
    episodic_to_semantic_min: Int = Field(default=3, ge=2, le=1000)


class OwnerRule(_Strict):
    """Who answers for records of a namespace glob that carry no owner of their own.

    ``owner: "{actor}"`` makes the record's actor its owner (a user owns their own facts);
    ``memory_types`` limits the rule: procedural records usually need a team, not a user.
    """

    namespace: NamespaceGlob  # a glob per segment: namespaces.glob_match
    owner: Text = Field(min_length=1)
    memory_types: list[MemoryType] = Field(
        default_factory=lambda: [MemoryType.episodic, MemoryType.semantic], min_length=1
    )

    @field_validator("owner")
    @classmethod
    def _one_placeholder(cls, v: str) -> str:
        # taken as written, a typo ("{user}") or a blank owner owned every record of the
        # glob: no MISSING_OWNER review was ever opened (audit 47l)
        if not v.strip():
            raise ValueError("is blank")
        other = sorted(set(re.findall(r"\{[^{}]*\}", v)) - {"{actor}"})
        if not other and any(b in v.replace("{actor}", "") for b in "{}"):
            other = ["a stray brace"]  # "{actor", "{{actor}}": never replaced, a literal
        if other:
            raise ValueError(
                f"has the placeholder(s) {', '.join(other)}; the only one is {{actor}}"
            )
        return v


class VerificationPolicy(_Strict):
    """Which sources count as verification, at first write and when stated again."""

    # stamped last_verified_at when first written; agent inference never is
    verified_at_write: list[Source] = Field(
        default_factory=lambda: [Source.system_of_record, Source.user_confirmed]
    )
    # a duplicate `remember` from one of these sources counts as a fresh verification
    verified_on_restatement: list[Source] = Field(
        default_factory=lambda: [Source.system_of_record, Source.user_confirmed, Source.user_stated]
    )


class ReviewPolicy(_Strict):
    """When a record becomes a review item, and how many open per night.

    Staleness and a low score alone only lower the score; they open a review item only
    where acting on the record matters (types/classes below, frequently recalled records,
    records in a group the run changes). New items are opened by priority up to
    ``nightly_budget``; the rest wait for a later night and are counted, the best
    ``waiting_listed`` of them by name (`review list --waiting`), each gaining
    ``waiting_priority_per_day`` of priority a day since it was first found.
    """

    nightly_budget: Int = Field(default=500, ge=0)
    # findings past the budget kept by name as waiting, with when they were first found
    # (a process holds the budget's and these best findings: ~1 KB each, ~70 MB at 50,000)
    waiting_listed: Int = Field(default=5000, ge=0, le=50_000)
    # what a waiting finding gains a day: priorities span about 0-4 (type, class, low
    # confidence, access), so a finding of the lowest priority outranks a new one of the
    # highest within about 40 days, however many higher ones keep coming
    waiting_priority_per_day: Num = Field(default=0.1, ge=0, le=10)
    stale_types: list[MemoryType] = Field(default_factory=lambda: [MemoryType.procedural])
    stale_classes: list[RetentionClass] = Field(default_factory=lambda: [RetentionClass.sensitive])
    frequent_access_count: Int = Field(default=5, ge=1)
    # a `keep` answers a finding time brings (STALE_VERIFICATION, LOW_SCORE) for this many
    # days: still found after that, it is asked again (a new item). None: for good
    keep_answers_days: Int | None = Field(default=365, ge=1, le=MAX_DAYS)
    # priority = type weight + class weight + (1 - confidence) + access share, see plan.py
    type_priority: dict[MemoryType, Share] = Field(
        default_factory=lambda: {
            MemoryType.procedural: 1.0,
            MemoryType.semantic: 0.5,
            MemoryType.episodic: 0.2,
        }  # fmt: skip
    )
    class_priority: dict[RetentionClass, Share] = Field(
        default_factory=lambda: {
            RetentionClass.sensitive: 1.0,
            RetentionClass.standard: 0.0,
            RetentionClass.legal_hold: 0.0,
        }  # fmt: skip
    )


class InferencePolicy(_Strict):
    """Subjects inferred from embeddings for records that carry none (group.py)."""

    enabled: Annotated[bool, Strict()] = True
    topic_cosine: Num = Field(default=0.5, gt=0, le=1)  # joins a subject's leader
    update_cosine: Num = Field(default=0.5, gt=0, le=1)  # a possible update's floor
    max_leaders: Int = Field(default=2000, ge=1)  # per shard: bounds memory and time
    # merges without a person's subject need more than the near-duplicate cosine
    merge_cosine: Num = Field(default=0.92, gt=0, le=1)


class GatePolicy(_Strict):
    # required: an apply run without an evaluation set supersedes, consolidates and
    # deletes nothing for score or review reasons where deletion is enforced
    required: Flag = True
    must_retain_recall_min: Num = Field(default=1.0, ge=0, le=1)
    forbidden_retrieval_max: Num = Field(default=0.0, ge=0, le=1)
    contradiction_rate_max: Num = Field(default=0.0, ge=0, le=1)
    aggregate_score_min: Num = Field(default=0.0, ge=0, le=1)
    # a gate below its threshold is a warning unless this run made it worse; true: it blocks
    block_on_absolute: Flag = False
    replicas: Int = Field(default=1, ge=1, le=100)


class Limits(_Strict):
    """Input bounds: what import and `remember` accept (bytes of UTF-8 content)."""

    content_max_bytes: Int = Field(default=64 * 1024, ge=1, le=16 * 1024 * 1024)


def policy_key(version: str) -> str:
    """One file for every spelling a receipt reader cannot tell apart: "v1", "V1", "v1 ",
    "v1" with a zero-width space, "café" composed or not (session 29 review)."""
    folded = unicodedata.normalize("NFKC", version).casefold()
    plain = "".join(c for c in folded if unicodedata.category(c) not in ("Cc", "Cf")).strip()
    return f"policies/{quote(plain, safe='')}.yaml"


class Policy(_Strict):
    version: Text = Field(min_length=1)
    description: Text = ""
    enforce_deletion_in: list[NamespaceGlob] = Field(default_factory=list)
    source_weights: dict[Source, Share]
    sensitivity_penalty: dict[RetentionClass, Share] = Field(default_factory=dict)
    contradiction_penalty: Num = Field(default=0.3, ge=0, le=1)
    pending_delete_grace_days: Num = Field(default=7, ge=0, le=MAX_DAYS)
    grouping: Grouping = Field(default_factory=Grouping)
    memory_types: dict[MemoryType, TypePolicy]
    gate: GatePolicy = Field(default_factory=GatePolicy)
    limits: Limits = Field(default_factory=Limits)
    owners: list[OwnerRule] = Field(default_factory=list)
    verification: VerificationPolicy = Field(default_factory=VerificationPolicy)
    review: ReviewPolicy = Field(default_factory=ReviewPolicy)
    inference: InferencePolicy = Field(default_factory=InferencePolicy)
    # superseded originals are deleted (receipted) this many days after they were superseded;
    # a class missing here keeps them (legal_hold is never deleted whatever this says)
    # a negative value deleted superseded originals the night they were superseded
    superseded_retention_days: dict[
        RetentionClass, Annotated[float, Strict(), Field(ge=0, le=MAX_DAYS)]
    ] = Field(default_factory=dict)

    @field_validator("version")
    @classmethod
    def _version_names_a_file(cls, v: str) -> str:
        # an apply run keeps the rules under this name (policy_record): too long for a file
        # name, the dry run passed and the apply run crashed (OSError, audit 47l)
        if policy_key(v) == policy_key(""):  # spaces or invisible characters only: receipts
            # named a version nobody can read, and every such policy shared policies/.yaml
            raise ValueError("is blank: name the rules (receipts and records carry it)")
        if len(policy_key(v).rsplit("/", 1)[1].encode()) > 255:
            raise ValueError("is too long for the file its rules are kept in "
                             "(policies/{version}.yaml, 255 bytes once quoted)")  # fmt: skip
        return v

    @field_validator("owners")
    @classmethod
    def _every_owner_rule_can_apply(cls, rules: list[OwnerRule]) -> list[OwnerRule]:
        # the first matching rule wins: one under an earlier rule's glob and types never
        # applies, and an edit meant to give those records another owner would do nothing
        for j, later in enumerate(rules):
            for i, earlier in enumerate(rules[:j]):
                if set(later.memory_types) <= set(earlier.memory_types) and glob_covers(
                    earlier.namespace, later.namespace
                ):
                    raise ValueError(
                        f"rule {j} ({later.namespace!r}) never applies: rule {i} "
                        f"({earlier.namespace!r}) comes first and answers for its namespaces "
                        "and memory types"
                    )
        return rules

    @model_validator(mode="after")
    def _complete(self) -> Policy:
        missing = [t.value for t in MemoryType if t not in self.memory_types]
        if missing:
            raise ValueError(f"memory_types is missing {', '.join(missing)}")
        missing = [s.value for s in Source if s not in self.source_weights]
        if missing:
            raise ValueError(f"source_weights is missing {', '.join(missing)}")
        return self

    def fingerprint(self) -> str:
        """sha256 of the policy as parsed (not the file: comments and layout do not count).
        Run keys and the consolidation memo use it beside ``version``: a threshold edited
        without a new version is still another policy, never a replay of the old one's.
        Not cached on the model: ``model_copy(update=...)`` would carry a stale value."""
        canon = json.dumps(self.model_dump(mode="json"), sort_keys=True)
        return hashlib.sha256(canon.encode()).hexdigest()

    def ttl_days(self) -> dict[MemoryType, float | None]:
        """Each memory type's default TTL in days (None: never expires by age)."""
        return {mt: tp.default_ttl_days for mt, tp in self.memory_types.items()}

    def deletion_enforced(self, namespace: str) -> bool:
        if not namespace.startswith("/"):
            warn_unrooted(namespace)
        return any(glob_match(pat, namespace) for pat in self.enforce_deletion_in)

    def unmatched_enforcement(self, namespaces: Iterable[str]) -> list[str]:
        """The ``enforce_deletion_in`` globs no namespace of ``namespaces`` matches: a typo
        that is still a glob ("/user/*/episodes") silently enforces nothing where it meant
        to, so an unscoped run names each one (it may also be a namespace not used yet)."""
        seen = set(namespaces)
        for ns in sorted(n for n in seen if not n.startswith("/")):
            warn_unrooted(ns)
        return [g for g in self.enforce_deletion_in if not any(glob_match(g, ns) for ns in seen)]

    def owner_for(self, actor_id: str, namespace: str, memory_type: MemoryType | str) -> str | None:
        """The owner the first matching rule gives a record without one; None: no rule."""
        for rule in self.owners:
            if memory_type in rule.memory_types and glob_match(rule.namespace, namespace):
                return rule.owner.replace("{actor}", actor_id)
        return None


@lru_cache(maxsize=1024)  # once per namespace and process: named, never repeated per record
def warn_unrooted(namespace: str) -> None:
    """Name a namespace without its leading '/' (written before import, `remember` and
    MEMLIFE_NAMESPACE refused them, memlife/namespaces.py): every glob starts with '/', so
    no ``enforce_deletion_in`` or ``owners`` rule can ever match it; its deletions, hard
    expiry included, stay proposals night after night. Its records stay readable."""
    log.warning(
        "namespace %r has no leading '/': no policy glob can match it, so nothing there is "
        "ever deleted by policy (hard expiry included) until its records are moved to %r",
        namespace,
        "/" + namespace,
    )


def resolve_policy_path(path: str | Path | None) -> Path:
    """A given path; the repository's or the installed copy of the default otherwise."""
    p = Path(path or DEFAULT_POLICY)
    if p.is_dir():
        raise PolicyError(f"policy file {p} is a folder")
    if p.exists():
        if p in _SHIPPED:
            _say_if_not_shipped(p.resolve())
        return p
    # only the shipped policies' own relative names fall back to the installed copies: a
    # missing my-team/default.yaml is an error, never silently the bundled default
    copies = _shipped_copies(p.name) if p in _SHIPPED else []
    if copies:
        return copies[0]
    raise PolicyError(f"policy file {p} not found")


def _shipped_copies(name: str) -> list[Path]:
    bases = (Path(__file__).parent.parent / "policies", Path(__file__).parent / "_policies")
    return [base / name for base in bases if (base / name).exists()]


@lru_cache(maxsize=16)
def _say_if_not_shipped(found: Path) -> None:
    """A shipped policy's name (``policies/default.yaml``, the default of ``--policy``) found
    in the working directory with other rules than memlife's own copy: it is used, as a
    path given is, and said once, since a project's own file of that name would otherwise
    win silently wherever the command happens to run."""
    shipped = _shipped_copies(found.name)
    if shipped and shipped[0].resolve() != found and shipped[0].read_bytes() != found.read_bytes():
        log.warning(
            "policy: %s is the working directory's, not memlife's own %s; pass --policy "
            "(or run elsewhere) to choose",
            found,
            shipped[0],
        )


_SHIPPED = {Path(DEFAULT_POLICY), Path("policies/rollout-example.yaml")}


class _UniqueKeyLoader(yaml.SafeLoader):  # type: ignore[misc]  # PyYAML ships no types
    """safe_load that refuses a key written twice in one mapping (PyYAML keeps the last:
    a repeated ``enforce_deletion_in: []`` further down would silently win).

    Merge keys (``<<: *anchor``, ``<<: [*a, *b]``) are standard YAML and work as in
    ``safe_load``: a key written beside a merge overrides the merged one. Only keys written
    in the mapping itself count as repeats (``<<`` written twice is one too)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[object, object]:
        seen: set[object] = set()
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG:
                key: object = _MERGE  # the merge itself has no constructor: never build it
            else:
                key = self.construct_object(key_node, deep=deep)
            try:
                repeated = key in seen
            except TypeError:  # unhashable: SafeConstructor names it below
                continue
            if repeated:
                line = key_node.start_mark.line + 1
                name = "'<<' (merge)" if key is _MERGE else repr(key)
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {name} repeated (line {line})", key_node.start_mark
                )
            seen.add(key)
        # SafeConstructor flattens the merges first (explicit keys win), then builds
        mapping: dict[object, object] = super().construct_mapping(node, deep=deep)
        return mapping

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        """YAML 1.1 reads a leading 0 as octal and a colon as base 60: ``030`` days was 24,
        ``1:30`` was 90. Refused: the operator meant the digits as written."""
        digits = str(node.value).replace("_", "").lstrip("+-")
        if ":" in digits or (len(digits) > 1 and digits[0] == "0" and digits[1].isdigit()):
            raise yaml.constructor.ConstructorError(
                None, None, f"{node.value!r} is octal or base 60 in YAML 1.1: write it without "
                "the leading 0 or the ':'", node.start_mark)  # fmt: skip
        value: int = super().construct_yaml_int(node)
        return value

    def construct_yaml_float(self, node: yaml.ScalarNode) -> float:
        """Base 60 too, as the int above: ``1:30.0`` days was 90.0 (audit 49e)."""
        if ":" in str(node.value):
            raise yaml.constructor.ConstructorError(
                None, None, "a number with ':' is base 60 in YAML 1.1: write it without the "
                "':'", node.start_mark)  # fmt: skip
        value: float = super().construct_yaml_float(node)
        return value

    def construct_object(self, node: yaml.Node, deep: bool = False) -> object:
        """PyYAML's constructors raise bare ValueError, KeyError or IndexError for an explicit
        tag on text that is not of its type (``!!int 9O``, ``!!bool maybe``, ``!!float ''``):
        a traceback, or one line naming no file, key or line (audit 49e). A YAML error at the
        value's line instead; the value is not quoted (an evaluation set's are content)."""
        try:
            return super().construct_object(node, deep=deep)
        except (ValueError, KeyError, IndexError, TypeError, OverflowError):  # not YAMLErrors
            kind = str(node.tag).rsplit(":", 1)[-1]
            raise yaml.constructor.ConstructorError(
                None, None, f"not a valid {kind} value", node.start_mark) from None  # fmt: skip


_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:int", _UniqueKeyLoader.construct_yaml_int)
_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:float", _UniqueKeyLoader.construct_yaml_float)


_MERGE_TAG = "tag:yaml.org,2002:merge"
_MERGE = object()  # a merge key among the keys seen (a quoted "<<" is an ordinary key)


def load_policy(path: str | Path | None = None) -> Policy:
    p = resolve_policy_path(path)
    return parse_policy(p.read_bytes(), p)


def parse_policy(text: bytes, p: Path) -> Policy:
    """The policy these bytes (read once from ``p``) hold: a run keeps and digests the very
    bytes it applies (audit 47l: a second read could record a file edited in between)."""
    try:
        data = yaml.load(text.decode("utf-8"), Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader)
    except UnicodeDecodeError:
        raise PolicyError(f"{p}: not UTF-8 text") from None
    except yaml.YAMLError as exc:
        raise PolicyError(f"{p}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise PolicyError(f"{p}: expected a mapping at the top level")
    try:
        return Policy.model_validate(data)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        key = ".".join(str(x) for x in err["loc"]) or "<top>"
        raise PolicyError(f"{p}: key '{key}': {err['msg']}") from None
