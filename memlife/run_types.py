"""The nightly run's types, and nothing else: what a run is asked to do (``RunConfig``),
what it fixed when it started (``RunContext``), its unit of work (``Shard``), what a batch
of shards produced (``BatchOutcome``) and what the run reports (``RunSummary``).

Kept apart from the steps (memlife/pipeline.py and the modules it calls) so that the
gate, the fan-out helpers, the CLI and the flows can name them without importing the
run sequence. ``RunConfig`` is pydantic: the Prefect flow takes it as its one parameter
(a form in the Prefect UI) and the CLI builds the same object.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from memlife.apply import DeleteItem, StagedGroup, Tally
from memlife.apply.groups import StagedRef as StagedRef  # re-exported: the pipeline's name
from memlife.audit import ReceiptSink, run_prefix
from memlife.errors import InputError
from memlife.model import parse_time, utcnow
from memlife.namespaces import glob_match
from memlife.policy import DEFAULT_POLICY, Policy
from memlife.review_queue.candidates import ReviewCandidates

if TYPE_CHECKING:
    from memlife.ledger_merge import ActorStats


class RunConfig(BaseModel):
    """One lifecycle run's settings (the flow's parameter, the CLI's options)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    dry_run: bool = Field(True, description="Plan and report; change nothing")
    namespaces: tuple[str, ...] = Field((), description="Namespace globs; empty = all")
    actors: tuple[str, ...] = Field((), description="Actor ids; empty = all")
    now: datetime | None = Field(None, description="Processing cutoff (ISO-8601 with zone)")
    policy: str = Field(DEFAULT_POLICY, description="Policy file")
    store: str | None = Field(None, description="Store URL; default MEMLIFE_STORE")
    receipts: str | None = Field(None, description="Receipts URL; default MEMLIFE_RECEIPTS")
    page_size: int = Field(500, ge=1, le=10_000)
    shards_per_batch: int = Field(100, ge=1)
    consolidate: bool = Field(True, description="Call the consolidator for groups")
    retry_only: bool = Field(False, description="Only drain the retry queue")
    eval_cases: str | None = Field(None, description="Regression-gate cases (file or s3://)")
    with_model: bool = Field(False, description="Let a dry run call the model")
    metrics_namespace: str | None = Field(None, description="CloudWatch namespace for counts")
    cloudtrail: str | None = Field(None, description="CloudTrail logs to ingest first")
    workers: int = Field(0, ge=0, description="Planning processes (local engine); 0 = auto")
    fan_out: Literal["tasks", "deployments"] = Field(
        "tasks", description="Prefect: batches as tasks, or child runs of the shard deployment"
    )
    max_workers: int = Field(4, ge=1, description="Prefect: threads for batch tasks")
    shard_deployment: str = Field("memlife-shard/shard", description="Prefect: child runs")
    attempt: str | None = Field(None, description="Set by start_run; children inherit it")
    state: str | None = Field(None, description="MEMLIFE_STATE for this run (dynamodb://...)")
    allow_future_cutoff: bool = Field(
        False, description="Accept an apply cutoff more than 48 h ahead of the clock"
    )

    @field_validator("now", mode="before")
    @classmethod
    def _aware(cls, value: Any) -> Any:
        """A naive cutoff is refused (we never guess a zone)."""
        if isinstance(value, str):
            return parse_time(value) if value else None
        if isinstance(value, datetime) and value.tzinfo is None:
            raise ValueError("cutoff has no timezone")
        # one instant, one run id and one folder, whatever zone it was given in
        try:
            return value.astimezone(UTC) if isinstance(value, datetime) else value
        except OverflowError:  # pydantic names only a ValueError's field (audit 50f)
            raise ValueError("cutoff is out of range once converted to UTC") from None

    @field_validator("attempt", mode="before")
    @classmethod
    def _attempt_is_a_name(cls, value: Any) -> Any:
        """Joined onto paths (the report folder, the sealing key): a name, never a path."""
        return None if value in (None, "") else check_name(value, "attempt")

    @field_validator("namespaces", "actors", mode="before")
    @classmethod
    def _none_is_empty(cls, value: Any) -> Any:
        return () if value is None else value

    def covers(self, actor_id: str, namespace: str) -> bool:
        """The run's scope holds this shard (actor ids, namespace globs; empty = all)."""
        if self.actors and actor_id not in self.actors:
            return False
        return not self.namespaces or any(glob_match(g, namespace) for g in self.namespaces)


# what start_run makes an attempt (20260301T000000000000Z-1234) and a parent a part ("7"):
# one path component; "/", "..", an absolute path would put files (and the merge's removal
# of ``<attempt>/parts``) outside MEMLIFE_HOME
_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}")


def check_name(value: Any, field_name: str) -> str:
    """``value`` if it is a plain file name (a flow parameter joined onto a path)."""
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise InputError(f"{field_name}: a plain name of letters, digits, '.', '_', '-' is "
                         "expected, not a path")  # fmt: skip
    return value


MAX_AHEAD = timedelta(hours=48)
MAX_BEHIND = timedelta(days=36_500)  # the policy's longest span (MAX_DAYS)


def operator_config(config: RunConfig, scheduled: datetime | None = None) -> RunConfig:
    """A run an operator or a schedule starts (the CLI, the Prefect flow), made safe:
    - the cutoff is pinned to ``scheduled`` (the flow run's scheduled start) when none is
      given, so a retry of the same flow run is the same run (same id: it resumes) rather
      than a new one at a later cutoff;
    - an apply cutoff more than 48 h ahead of the clock is refused unless
      ``allow_future_cutoff`` (``now: 9999-12-30`` expires everything at once: 59 of 300
      demo records deleted); a cutoff in the past is a replay and stays allowed, and a dry
      run accepts any;
    - a retry-only dry run, and a model run with no model configured, are refused (a flow
      told ``retry_only: true`` alone would otherwise drain nothing and report success)."""
    if config.retry_only and config.dry_run:
        raise InputError("retry_only applies; it cannot be combined with dry_run (dry_run: false)")
    if config.with_model:
        from memlife.settings import settings

        if not settings().anthropic_api_key:
            raise InputError("with_model: no model is configured (set ANTHROPIC_API_KEY)")
    if config.now is None and scheduled is not None:
        config = config.model_copy(update={"now": scheduled.astimezone(UTC)})
    if config.now is not None and config.now < utcnow() - MAX_BEHIND:
        # year 1 overflowed the planner's date arithmetic after the manifest and receipt were
        # written; year 26 ran, under a malformed run id and a folder runs/26/
        raise InputError(
            f"cutoff {config.now.isoformat()} is more than 100 years before the clock: no "
            "memory is that old; give the cutoff you mean"
        )
    if (
        config.now is not None and not config.dry_run and not config.allow_future_cutoff
        and config.now > utcnow() + MAX_AHEAD
    ):  # fmt: skip
        raise InputError(
            f"cutoff {config.now.isoformat()} is more than 48 h ahead of the clock (pass "
            "--allow-future-cutoff, or allow_future_cutoff: true, if you mean it)"
        )
    return config


@dataclass(frozen=True, slots=True)
class Shard:
    actor_id: str
    namespace: str

    def __str__(self) -> str:
        """For people, and the key of a failure event's codes: an actor holding ':' (AgentCore
        allows "a:/x") or opening with '"' is written as a JSON string, so actor "a" +
        "/x:/y" and "a:/x" + "/y" never read as one shard (audit 50b)."""
        actor = self.actor_id
        if ":" in actor or actor.startswith('"'):
            actor = json.dumps(actor, ensure_ascii=False)
        return f"{actor}:{self.namespace}"

    def failed(self, code: str, **more: Any) -> dict[str, Any]:
        """A failed-shard entry: its name for people, its scope as data (compare these)."""
        return {"shard": str(self), "actor_id": self.actor_id, "namespace": self.namespace,
                "code": code, **more}  # fmt: skip


@dataclass
class RunContext:
    config: RunConfig
    policy: Policy
    run_id: str
    run_key: str
    cutoff: datetime
    started_at: datetime
    report_dir: Path
    manifest_location: str
    store_url: str
    sink: ReceiptSink
    # record id -> (last accessed, count) from the access ledger (recall telemetry, CloudTrail)
    access_stats: ActorStats = field(default_factory=dict)  # (actor, record id) -> its reads
    lease_taken_over: dict[str, Any] | None = (
        None  # the expired lease (of a killed run) this run took over
    )
    previous_run: str | None = None  # the store's run before this one (memlife/run_chain.py)
    # (option, value) of each scope glob or actor that matched nothing (memlife/run_scope.py)
    scope_unmatched: list[tuple[str, str]] = field(default_factory=list)

    @property
    def mode(self) -> str:
        return mode_of(self.config)

    @property
    def prefix(self) -> str:
        return run_prefix(self.run_id, self.cutoff)


def mode_of(config: RunConfig) -> str:
    return "retry" if config.retry_only else ("dry_run" if config.dry_run else "apply")


@dataclass
class BatchOutcome:
    counts: Counter[str] = field(default_factory=Counter)
    records: int = 0
    shards: int = 0
    failed_shards: list[dict[str, Any]] = field(default_factory=list)
    deletions: list[DeleteItem] = field(default_factory=list)
    staged: list[StagedGroup] = field(default_factory=list)  # consolidations awaiting the gate
    # a dry run without an evaluation set only counts its staged groups: how many per namespace
    # (whether each would be withheld), not a StagedRef each (~110 B apiece held to the end)
    staged_refs: Counter[str] = field(default_factory=Counter)
    # a dry run without an evaluation set only counts its deletions in enforced namespaces:
    # "obligation" (hard expiry, a user's forget) or "judgement", for the gate's line
    deletion_refs: Counter[str] = field(default_factory=Counter)
    tally: Tally = field(default_factory=Tally)
    # review findings, queued after planning: the budget's best only, counts of the rest
    reviews: ReviewCandidates = field(default_factory=ReviewCandidates)


def collect(outcomes: list[BatchOutcome], outcome: BatchOutcome) -> None:
    """Add a batch's outcome to the run's; its review findings join the first outcome's,
    so a run holds one bounded set of them however many batches it plans (every path:
    one process, planning children, Prefect tasks and child flow runs)."""
    if outcomes:
        kept = outcomes[0].reviews
        if kept.budget is None:  # the first was a failed batch's (no findings, no budget)
            new = outcome.reviews
            kept.budget, kept.listed, kept.age_per_day, kept.at = (
                new.budget, new.listed, new.age_per_day, new.at,
            )  # fmt: skip
        kept.absorb(outcome.reviews)
    outcomes.append(outcome)


@dataclass
class RunSummary:
    run_id: str
    policy_version: str
    cutoff: str
    mode: str
    status: str
    counts: dict[str, int]  # planned actions
    lifecycle: dict[str, int]  # processed, retained, consolidated, superseded, deleted, ...
    records: int
    shards: int
    report: str
    report_parquet: str
    manifest: str
    receipt: str | None
    seconds: float
    failed_shards: list[dict[str, Any]] = field(default_factory=list)
    model: dict[str, Any] = field(default_factory=dict)
    gate: dict[str, Any] | None = None
    other: dict[str, Any] = field(
        default_factory=dict
    )  # e.g. consolidation_proposed, merged_duplicates
    report_html: str | None = None  # the run's report page, beside its receipts

    @property
    def dry_run(self) -> bool:
        return self.mode == "dry_run"

    def as_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "policy_version": self.policy_version,
            "cutoff": self.cutoff,
            "mode": self.mode,
            "dry_run": self.dry_run,
            "status": self.status,
            "counts": self.counts,
            "lifecycle": self.lifecycle,
            "records": self.records,
            "shards": self.shards,
            "report": self.report,
            "report_parquet": self.report_parquet,
            "manifest": self.manifest,
            "receipt": self.receipt,
            "seconds": round(self.seconds, 3),
            "failed_shards": self.failed_shards,
            "model": self.model,
            "gate": self.gate,
            "other_counts": self.other,
            "report_html": self.report_html,
        }  # fmt: skip  (one line per group of keys: the receipt's shape at a glance)
