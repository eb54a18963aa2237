"""Every setting memlife reads from the environment, in one typed place.

``settings()`` parses the environment on first use (never at import time) and returns the
same frozen ``Settings`` until a relevant variable changes (tests and the CLI set them;
a process that never changes them parses once). Each field is one variable: the field
name upper-cased with the ``MEMLIFE_`` prefix, except the Anthropic ones, which keep the
SDK's own names. README "Settings" lists them all; ``memlife config show`` prints the
resolved values with secrets masked. Deployment-only variables that memlife itself never
reads (``MEMLIFE_WORKDIR``, ``MEMLIFE_TIMEZONE``, ...) belong to deploy/ and its docs.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from memlife.errors import SettingsError

PREFIX = "MEMLIFE_"
# onnxruntime gains nothing past the machine's cores; 256 covers the largest instances
# (192 vCPUs) while 100000 (a typo or a unit slip) started that many threads: recall never
# answered and memory grew ~45 MB/s until the host ran out of threads. A fixed bound, not
# a multiple of this host's CPUs: a setting valid on one machine stays valid on the next.
EMBED_THREADS_MAX = 256
# Spans of seconds become timedeltas and sleeps: inf or 1e300 passed `gt=0` and then ended
# the run with a bare OverflowError. Each has a sane maximum besides (see the fields).
HOUR = 3600.0
DAY = 24 * HOUR
# Read under their own names (the SDK reads them too).
_FOREIGN = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL")
# MEMLIFE_ variables that deploy/ files read and memlife does not (README "Settings"). Any
# other MEMLIFE_ name that is no setting is a typo: MEMLIFE_LEASE_TTL_SECOND=30 was
# dropped silently and the lease stayed 120 s.
DEPLOY_ONLY = (
    "MEMLIFE_WORKDIR", "MEMLIFE_TIMEZONE", "MEMLIFE_ALERT_BLOCK_ID", "MEMLIFE_MEMORY_ID",
    "MEMLIFE_SIDECAR_TABLE", "MEMLIFE_RECEIPTS_BUCKET", "MEMLIFE_RECEIPTS_PREFIX",
    "MEMLIFE_RECEIPTS_KMS_KEY_ID", "MEMLIFE_STATE_TABLE", "MEMLIFE_STATE_BUCKET",
    "MEMLIFE_STATE_PREFIX", "MEMLIFE_STATE_KMS_KEY_ID", "MEMLIFE_CLOUDTRAIL_BUCKET",
    "MEMLIFE_CLOUDTRAIL_PREFIX",
)  # fmt: skip

Shown = str | int | float | bool | None  # a value as `memlife config show --json` gives it
_PLACEHOLDER = re.compile(r"\{[^{}]*\}")
# other templating a deploy may have left unexpanded: $ACTOR, ${ACTOR}, <actor>, %(actor)s
_FOREIGN_PLACEHOLDER = re.compile(r"\$\{?\w+\}?|<[^<>/]*>|%\(\w+\)")


def store_url_problem(url: str) -> str | None:
    """Why ``url`` is no store URL, or None (whether a SQLite file exists is the caller's
    question)."""
    from urllib.parse import urlparse

    if url != url.strip():  # 'm.db ' is another file: a second, empty store beside the one meant
        return "has leading or trailing spaces"
    scheme = urlparse(url).scheme
    if scheme == "sqlite":
        if not url.startswith("sqlite:///") or not url[len("sqlite:///") :]:
            return "expected sqlite:///path/to/file.db"
        if "?" in url or "#" in url:
            # a SQLite store takes no options: '?mode=ro' would become part of the file
            # name (a new, empty store 'm.db?mode=ro' beside the one meant)
            return (
                "a sqlite:/// URL takes no query string or fragment ('?', '#'): give only the path"
            )
        return None
    if scheme == "agentcore":
        return None
    return "use sqlite:///path/to/file.db or agentcore://MEMORY_ID?region=.."


def is_http_url(url: str) -> bool:
    from urllib.parse import urlparse

    parsed = urlparse(url)
    return url == url.strip() and parsed.scheme in ("http", "https") and bool(parsed.hostname)


DEFAULT_AGENTCORE_REGION = "us-east-1"  # an AgentCore URL without ?region= or AWS_REGION


def aws_region(explicit: str | None) -> str | None:
    """A URL's ``region``, else AWS_REGION, else AWS_DEFAULT_REGION; None when none says.

    One reading for every URL, so ``agentcore://M`` names the store (and its lease) that
    ``agentcore://M?region=$AWS_REGION`` names."""
    return explicit or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or None


def endpoint_problem(url: str) -> str | None:
    """Why ``url`` is no endpoint to send memory or evidence to (MEMLIFE_S3_ENDPOINT_URL, or
    ``endpoint_url`` inside a state or receipts URL), or None: an http(s) URL with a host,
    and AWS's own over https only (content and evidence never cross in the clear)."""
    from urllib.parse import urlparse

    if not is_http_url(url):
        return "expected an http(s) URL, e.g. http://127.0.0.1:9000"
    parsed = urlparse(url)
    if parsed.scheme == "http" and (parsed.hostname or "").endswith(".amazonaws.com"):
        return "AWS's own endpoint over plain http: use https://"
    return None


class Settings(BaseSettings):
    """The resolved settings. Derived defaults (store, receipts) are properties."""

    # An empty variable counts as unset (as `if os.environ.get(...)` always treated it).
    model_config = SettingsConfigDict(
        env_prefix=PREFIX, extra="ignore", frozen=True, env_ignore_empty=True,
        allow_inf_nan=False,  # no setting means anything by inf or nan
    )  # fmt: skip

    # where state lives
    home: Path = Field(
        Path(".memlife"), description="Local state: SQLite store, journal, ledger, caches"
    )
    store: str | None = Field(
        None, description="Store URL; default sqlite:///$MEMLIFE_HOME/memlife.db"
    )
    receipts: str | None = Field(
        None, description="Receipts URL; default file://$MEMLIFE_HOME/receipts"
    )
    s3_endpoint_url: str | None = Field(
        None, description="S3 endpoint for s3:// receipts (MinIO, moto)"
    )
    state: str | None = Field(
        None,
        description="Run state backend (dynamodb://TABLE?region=..&parquet=s3://..); default: "
        "a SQLite store's own file, files under MEMLIFE_HOME for any other store",
    )
    service_identity: str | None = Field(
        None,
        description="Who receipts name as the actor of a change; default memlife/<version>@<host>",
    )
    operator: str | None = Field(
        None,
        description="Who receipts name as the person behind a manual action (erase, hold "
        "place/release, quarantine restore/purge, import --update): `reviewer_identity`; "
        "default <OS user>@<host>. `review resolve` names its --reviewer instead",
    )
    # online library
    namespace: str = Field(
        "/users/{actor}/facts",
        description="Namespace of remember/recall ({actor} filled in; no other placeholder)",
    )
    chat_model: str = Field(
        "claude-sonnet-4-5", description="Model of the example agent (memlife chat)"
    )
    embed_threads: int | None = Field(
        None,
        ge=1,
        le=EMBED_THREADS_MAX,
        description="onnxruntime intra-op threads (1..256); default: onnxruntime's",
    )
    token_alignment: bool = Field(
        True,
        description="Recall: reorder the best 50 candidates by how well the question's words "
        "match each memory's tokens (memlife.token_match). Off: cosine, BM25 and time terms "
        "only, which saves the term's cost in recall on long memories; writes still store "
        "each memory's codes, so turning it on again needs no re-embedding (BENCHMARKS.md)",
    )
    model_cache: Path | None = Field(
        None,
        description="Derived embedding-model files (the pinned model, graph-optimised once); "
        "default $XDG_CACHE_HOME/memlife or ~/.cache/memlife, never under MEMLIFE_HOME",
    )
    # consolidation model
    model: str | None = Field(
        None, description="Consolidation/evaluation model; default claude-sonnet-4-5"
    )
    model_timeout: float = Field(60.0, gt=0, le=HOUR, description="Seconds per model request")
    model_concurrency: int = Field(4, ge=1, description="Model requests in flight per process")
    reuse_model_answers: bool = Field(
        True,
        description="An apply run uses the answers a dry run with --with-model was given "
        "(7 days); false: every run asks the model",
    )
    # orchestration (flows/)
    flow_timeout_seconds: float = Field(
        6 * HOUR, gt=0, le=7 * DAY, description="Nightly flow timeout"
    )
    # at most 10: Prefect takes 50 delays at most, and past ten doublings every wait is at
    # throttling.MAX_RETRY_DELAY_SECONDS: more retries only keep a throttled night going
    task_retries: int = Field(3, ge=0, le=10, description="Retries of a throttled shard batch")
    retry_backoff_seconds: float = Field(
        10.0,
        ge=0,
        le=HOUR,
        description="Backoff factor: 10 -> 10, 20, 40 s (each wait at most 15 min)",
    )
    retry_jitter: float = Field(0.5, ge=0, le=1, description="Retry jitter factor (0 to 1)")
    model_calls_limit: str = Field(
        "memlife-model-calls", description="Prefect global concurrency limit held per model call"
    )
    # at most a day: a writer killed while holding it blocks every other writer that long
    lease_ttl_seconds: float = Field(
        120.0,
        gt=0,
        le=DAY,
        description="Lifecycle lease: seconds a writer holds the store without renewal",
    )
    eval_cases: str | None = Field(
        None, description="Regression gate's evaluation set (file or s3://) when a run names none"
    )
    cloudwatch_namespace: str | None = Field(
        None, description="Emit run counts to CloudWatch under it"
    )
    # diagnostics
    debug: bool = Field(False, description="CLI: show tracebacks instead of one-line errors")
    fault: str | None = Field(
        None, description="Tests/drills only: arm a fault point (point[:skip])"
    )
    fault_mark: str | None = Field(
        None, description="Tests/drills only: file touched when a 'hang' fault point is reached"
    )
    fault_mode: Literal["raise", "kill", "hang"] = Field(
        "raise", description="Tests/drills only: raise, kill or hang at the armed point"
    )
    # Anthropic (SDK names)
    anthropic_api_key: SecretStr | None = Field(
        None,
        validation_alias=AliasChoices("ANTHROPIC_API_KEY"),
        description="Enables the model consolidator",
    )
    anthropic_auth_token: SecretStr | None = Field(
        None,
        validation_alias=AliasChoices("ANTHROPIC_AUTH_TOKEN"),
        description="Alternative to the API key (chat)",
    )
    anthropic_base_url: str | None = Field(
        None,
        validation_alias=AliasChoices("ANTHROPIC_BASE_URL"),
        description="Messages API endpoint",
    )

    @field_validator("home", mode="before")
    @classmethod
    def _home(cls, v: object) -> object:
        if isinstance(v, str) and v != v.strip():  # 'home ' is another folder: another store
            raise ValueError("has leading or trailing spaces")
        if isinstance(v, str) and (v.startswith("~") or "?" in v or "#" in v):
            # no shell expands '~' here (a folder named '~'); '?' and '#' end the store's URL
            raise ValueError("starts with '~' or holds '?' or '#': give the folder's full path")
        return v

    @field_validator("model_cache", mode="before")
    @classmethod
    def _model_cache(cls, v: object) -> object:
        # no shell expands '~' in a unit file: the derived model went to a folder named '~'
        if isinstance(v, str) and v.startswith("~"):
            raise ValueError("starts with '~': give the folder's full path")
        return v

    @field_validator(
        "model", "chat_model", "model_calls_limit", "eval_cases", "cloudwatch_namespace",
        "receipts", "model_cache", "fault_mark", "anthropic_base_url", mode="before",
    )  # fmt: skip
    @classmethod
    def _no_surrounding_space(cls, v: object) -> object:
        """A name is taken as written: 'memlife ' is another CloudWatch namespace (the
        alarms watch 'memlife'), 'memlife-model-calls ' a Prefect limit nobody created,
        which Prefect does not enforce (model calls no longer bounded across workers)."""
        if isinstance(v, str) and v != v.strip():
            raise ValueError("has leading or trailing spaces (or is blank)")
        return v

    @field_validator("namespace")
    @classmethod
    def _namespace_template(cls, v: str) -> str:
        """The template must give a namespace `remember` accepts (a leading '/', no empty,
        '.' or '..' segment): refused here, naming the variable, not at each write. Its one
        placeholder is ``{actor}``: ``{user}`` (a typo) was kept literally and every actor's
        memories went into one namespace named ``/users/{user}/facts``."""
        from memlife.namespaces import new_namespace_problem

        other = sorted(set(_PLACEHOLDER.findall(v)) - {"{actor}"})
        other += sorted(set(_FOREIGN_PLACEHOLDER.findall(v)))
        if other:
            raise ValueError(
                f"the namespace template has the placeholder(s) {', '.join(other)}; "
                "the only one filled in is {actor}"
            )
        problem = new_namespace_problem(v.replace("{actor}", "actor"))
        if problem:
            raise ValueError(f"the namespace template {problem}")
        return v

    @field_validator("service_identity", "operator")
    @classmethod
    def _identity(cls, v: str | None) -> str | None:
        """Receipts name this as who acted: blank (an unexpanded template left spaces) it
        named nobody; a control or invisible character prints as someone else."""
        from memlife.text import invisible_at

        if v is None:
            return v
        if not v.strip():
            raise ValueError("blank: name a person, a ticket or a role, or leave it unset")
        if v != v.strip() or invisible_at(v) is not None:
            raise ValueError("holds leading or trailing space, or a character nobody sees")
        return v

    @field_validator("fault")
    @classmethod
    def _fault_point(cls, v: str | None) -> str | None:
        """``point[:skip]`` with a known point: a misspelled point armed nothing and the
        drill it was for passed without its fault."""
        from memlife.fault_points import POINTS

        if v is None:
            return v
        point, colon, skip = v.partition(":")
        if point not in POINTS or (colon and not skip.isdigit()):
            raise ValueError(f"expected point[:skip], a point one of {', '.join(POINTS)}")
        return v

    @field_validator("store")
    @classmethod
    def _store_url(cls, v: str | None) -> str | None:
        problem = store_url_problem(v) if v is not None else None
        if problem:
            raise ValueError(problem)
        return v

    @field_validator("s3_endpoint_url")
    @classmethod
    def _endpoint_url(cls, v: str | None) -> str | None:
        """An http(s) URL with a host: ``notaurl`` was accepted here and failed at the first
        receipt write, inside boto3, as "Invalid endpoint: notaurl"."""
        if v is not None and (problem := endpoint_problem(v)) is not None:
            raise ValueError(problem)
        return v

    @property
    def store_url(self) -> str:
        return self.store or f"sqlite:///{self.home}/memlife.db"

    @property
    def receipts_url(self) -> str:
        return self.receipts or f"file://{self.home}/receipts"

    @property
    def model_name(self) -> str:
        return self.model or DEFAULT_MODEL

    def shown(self) -> list[tuple[str, Shown, str]]:
        """(variable, resolved value, description) for every setting; secrets masked.
        A typed setting keeps its type (int, float, bool); paths and URLs are text."""
        rows = []
        for name, field in type(self).model_fields.items():
            var = name.upper() if name.startswith("anthropic_") else PREFIX + name.upper()
            value: Any = getattr(self, name)
            shown: Shown
            if isinstance(value, SecretStr):
                shown = "**** (set)"  # never any part of a secret
            elif value is None:  # unset: the derived default where there is one
                shown = {
                    "store": self.store_url,
                    "receipts": self.receipts_url,
                    "model": self.model_name,
                }.get(name)
            elif isinstance(value, (bool, int, float)):
                shown = value
            else:
                shown = without_password(str(value))
            rows.append((var, shown, field.description or ""))
        return rows


DEFAULT_MODEL = "claude-sonnet-4-5"


# "scheme://user:password@" anywhere in a text urlsplit cannot read
_USERINFO = re.compile(r"(//[^/?#@:\s]*):[^/?#\s]*@")


def without_password(value: str) -> str:
    """A URL's userinfo password masked (``https://user:****@proxy/``), also in a URL given
    as a query value (``dynamodb://T?endpoint_url=http://u:pw@host``): a base URL or
    endpoint may carry credentials, and `config show` never prints a secret."""
    from urllib.parse import parse_qsl, urlencode, urlsplit

    try:
        parts = urlsplit(value)
        password = parts.password
    except ValueError:  # "https://u:pw@proxy]/": shown whole, the password went with it
        return _USERINFO.sub(r"\1:****@", value)
    query = parse_qsl(parts.query, keep_blank_values=True)
    masked = [(k, without_password(v)) for k, v in query]
    if masked != query:
        parts = parts._replace(query=urlencode(masked, safe=":/@*"))
    if password:
        host = parts.netloc.rsplit("@", 1)[1]
        parts = parts._replace(netloc=f"{parts.username or ''}:****@{host}")
    return parts.geturl() if password or masked != query else value


def _relevant_environment() -> tuple[tuple[str, str], ...]:
    # in any case: pydantic-settings reads 'memlife_store' as MEMLIFE_STORE (_unknown refuses it)
    return tuple(
        sorted(
            (k, v)
            for k, v in os.environ.items()
            if k.upper().startswith(PREFIX) or k.upper() in _FOREIGN
        )
    )


def _unknown(env: tuple[tuple[str, str], ...]) -> str | None:
    """The first MEMLIFE_ variable set in ``env`` that memlife neither reads nor leaves to
    deploy/, with the setting it was probably meant to be, or the first spelt other than
    in capitals; None when there is none."""
    from difflib import get_close_matches

    known = {PREFIX + name.upper() for name in Settings.model_fields}
    named = known | set(DEPLOY_ONLY) | set(_FOREIGN)
    for name, value in env:
        upper = name.upper()
        if not value or (name == upper and upper in named):
            continue
        near = [upper] if upper in named else get_close_matches(upper, sorted(known), n=1)
        hint = f"; did you mean {near[0]}?" if near else ""
        if name != upper:
            # pydantic-settings reads names in any case; the Anthropic SDK and deploy/ read
            # capitals only: 'anthropic_base_url' was shown in force while the requests went
            # to api.anthropic.com, and a typo in lower case was dropped silently
            return f"{name}: settings are read in capitals only{hint}"
        return f"{name}: not a memlife setting (README lists them){hint}"
    return None


@lru_cache(maxsize=8)
def _parse(env: tuple[tuple[str, str], ...]) -> Settings:
    if problem := _unknown(env):
        raise SettingsError(problem)
    try:
        return Settings(_env_file=None)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        name = str(err["loc"][0]) if err["loc"] else "?"
        var = name.upper() if name.upper() in _FOREIGN else PREFIX + name.upper()
        msg = str(err["msg"]).removeprefix("Value error, ")  # our validators' own words
        got = without_password(str(err.get("input")))  # a refused URL keeps its password
        raise SettingsError(f"{var}: {msg} (got {got!r})") from None


def settings() -> Settings:
    """The settings for the current environment (parsed once per distinct environment)."""
    return _parse(_relevant_environment())
