"""The lifecycle policy: a versioned YAML file (policies/*.yaml) loaded into pydantic models.

Every decision the planner makes is a function of (record, policy, cutoff); the policy
version is written into manifests, receipts and changed records, so any change can be
traced to the rules that caused it. Unknown keys are errors: a typo must not silently
fall back to a default.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import yaml
from pydantic import BaseModel, ConfigDict, Field, Strict, ValidationError, model_validator

from memlife.errors import PolicyError as PolicyError  # moved; re-exported
from memlife.model import MemoryType, RetentionClass, Source
from memlife.namespaces import glob_match

DEFAULT_POLICY = "policies/default.yaml"


# Strict scalars: YAML reads `yes` as true and `"30"` as a string; neither is a number here
# (lax pydantic would turn `default_ttl_days: yes` into a 1-day TTL). An int is a number.
Num = Annotated[float, Strict()]
Int = Annotated[int, Strict()]
Text = Annotated[str, Strict()]
Flag = Annotated[bool, Strict()]
Share = Annotated[float, Strict(), Field(ge=0, le=1)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class ScoreWeights(_Strict):
    creation_recency: Num = Field(ge=0)
    access_recency: Num = Field(ge=0)
    frequency: Num = Field(ge=0)
    verification: Num = Field(ge=0)
    source: Num = Field(ge=0)

    @model_validator(mode="after")
    def _some_weight(self) -> ScoreWeights:
        if sum(self.model_dump().values()) <= 0:
            raise ValueError("at least one weight must be positive")
        return self


class HalfLives(_Strict):
    creation: Num = Field(gt=0)
    access: Num = Field(gt=0)


class TypePolicy(_Strict):
    default_ttl_days: Num | None = Field(default=None, gt=0)
    verification_stale_days: Num | None = Field(default=None, gt=0)
    half_life_days: HalfLives
    frequency_scale: Num = Field(default=10, gt=0)
    weights: ScoreWeights
    low_score: Num = Field(ge=0, le=1)


class Grouping(_Strict):
    near_duplicate_cosine: Num = Field(default=0.88, gt=0, le=1)
    max_group_size: Int = Field(default=12, ge=2, le=100)
    grounding_cosine: Num = Field(default=0.55, gt=0, le=1)


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
    replicas: Int = Field(default=1, ge=1)


class Limits(_Strict):
    """Input bounds: what import and `remember` accept (bytes of UTF-8 content)."""

    content_max_bytes: Int = Field(default=64 * 1024, ge=1, le=16 * 1024 * 1024)


class Policy(_Strict):
    version: Text = Field(min_length=1)
    description: Text = ""
    enforce_deletion_in: list[Text] = Field(default_factory=list)
    source_weights: dict[Source, Share]
    sensitivity_penalty: dict[RetentionClass, Share] = Field(default_factory=dict)
    contradiction_penalty: Num = Field(default=0.3, ge=0, le=1)
    pending_delete_grace_days: Num = Field(default=7, ge=0)
    grouping: Grouping = Field(default_factory=Grouping)
    memory_types: dict[MemoryType, TypePolicy]
    gate: GatePolicy = Field(default_factory=GatePolicy)
    limits: Limits = Field(default_factory=Limits)

    @model_validator(mode="after")
    def _complete(self) -> Policy:
        missing = [t.value for t in MemoryType if t not in self.memory_types]
        if missing:
            raise ValueError(f"memory_types is missing {', '.join(missing)}")
        missing = [s.value for s in Source if s not in self.source_weights]
        if missing:
            raise ValueError(f"source_weights is missing {', '.join(missing)}")
        return self

    def deletion_enforced(self, namespace: str) -> bool:
        return any(glob_match(pat, namespace) for pat in self.enforce_deletion_in)


def resolve_policy_path(path: str | Path | None) -> Path:
    """A given path; the repository's or the installed copy of the default otherwise."""
    p = Path(path or DEFAULT_POLICY)
    if p.exists():
        return p
    if path in (None, DEFAULT_POLICY) or p.name in {"default.yaml", "rollout-example.yaml"}:
        for base in (
            Path(__file__).parent.parent / "policies",
            Path(__file__).parent / "_policies",
        ):
            if (base / p.name).exists():
                return base / p.name
    raise PolicyError(f"policy file {p} not found")


def load_policy(path: str | Path | None = None) -> Policy:
    p = resolve_policy_path(path)
    try:
        data = yaml.safe_load(p.read_text())
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
