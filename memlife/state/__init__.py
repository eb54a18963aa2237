"""Where a run's state lives: the embedded default (SQLite files) or AWS, chosen by settings.

``MEMLIFE_STATE`` (or ``memlife run --state``) names the backend::

    dynamodb://TABLE?region=us-east-1                       journal, lease, quarantine
        &endpoint_url=http://127.0.0.1:5000                 snapshots, pending erasures,
        &parquet=s3://bucket/prefix                         tombstones, embedding cache;
        &s3_endpoint_url=...&ttl_days=30                    ledger + reports on S3

Unset (or ``local``), stores without a SQLite file of their own keep that state in files
under ``$MEMLIFE_HOME`` (one machine only). The SQLite store always keeps it in its own
file: one transaction covers a record and its journal entry.

With ``dynamodb://`` nothing of a run's state is written to the worker's disk: workers are
interchangeable and a fan-out may put shards on any of them (docs/orchestration.md).
``parquet=`` is required with ``dynamodb://``: the access ledger and the run reports are
Parquet datasets on S3, partitioned by date.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlparse

from memlife.errors import SettingsError

if TYPE_CHECKING:
    from memlife.state.dynamodb import DynamoState

ENV = "MEMLIFE_STATE"
_KNOWN = {"region", "endpoint_url", "parquet", "s3_endpoint_url", "ttl_days"}


class StateSettingsError(SettingsError):
    """A state URL that cannot be used (names the part that is wrong)."""


@dataclass(frozen=True)
class StateSettings:
    table: str
    region: str
    parquet_bucket: str
    parquet_prefix: str
    endpoint_url: str | None = None
    s3_endpoint_url: str | None = None
    ttl_days: int = 30  # finished operations expire (DynamoDB TTL) this long after receipt

    @property
    def parquet_url(self) -> str:
        return f"s3://{self.parquet_bucket}/{self.parquet_prefix}".rstrip("/")


def parse_state_url(url: str | None) -> StateSettings | None:
    """None for the embedded default (unset, empty or ``local``); else the DynamoDB settings."""
    if url is None or url.strip() in ("", "local"):
        return None
    from memlife.settings import aws_region, endpoint_problem, without_password  # light

    shown = without_password(url)  # refusals are printed: never an endpoint's password
    if url != url.strip():  # 'parquet=s3://b/p ' is another prefix: another ledger, reports
        raise StateSettingsError(f"state URL {shown!r}: has leading or trailing spaces")
    parsed = urlparse(url)
    if parsed.scheme != "dynamodb":
        raise StateSettingsError(
            f"state URL {shown!r}: unknown scheme {parsed.scheme!r} (use dynamodb:// or local)"
        )
    if not parsed.netloc or parsed.path.strip("/") or parsed.fragment:  # dropped, not read
        raise StateSettingsError(f"state URL {shown!r}: expected dynamodb://TABLE?region=...")
    params = {k: v[-1] for k, v in parse_qs(parsed.query).items()}
    unknown = set(params) - _KNOWN
    if unknown:
        raise StateSettingsError(f"state URL {shown!r}: unknown parameter(s) {sorted(unknown)}")
    region = aws_region(params.get("region"))
    if not region:
        raise StateSettingsError(f"state URL {shown!r}: region missing (?region=... or AWS_REGION)")
    parquet = params.get("parquet", "")
    pp = urlparse(parquet)
    if pp.scheme != "s3" or not pp.netloc or pp.query or pp.fragment:  # '#', '?': cut short
        raise StateSettingsError(
            f"state URL {shown!r}: parameter 'parquet' must be s3://bucket/prefix "
            "(the access ledger and reports go there)"
        )
    for name in ("endpoint_url", "s3_endpoint_url"):
        if name in params and (problem := endpoint_problem(params[name])) is not None:
            raise StateSettingsError(f"state URL {shown!r}: {name}: {problem}")
    try:
        ttl_days = int(params.get("ttl_days", "30"))
    except ValueError:
        raise StateSettingsError(f"state URL {shown!r}: ttl_days must be an integer") from None
    if ttl_days < 1:
        raise StateSettingsError(f"state URL {shown!r}: ttl_days must be at least 1")
    if ttl_days > 36_500:  # as a policy's day spans: now + the TTL must stay a date
        raise StateSettingsError(f"state URL {shown!r}: ttl_days must be at most 36500 (days)")
    return StateSettings(
        table=parsed.netloc,
        region=region,
        parquet_bucket=pp.netloc,
        parquet_prefix=pp.path.strip("/"),
        endpoint_url=params.get("endpoint_url"),
        s3_endpoint_url=params.get("s3_endpoint_url") or params.get("endpoint_url"),
        ttl_days=ttl_days,
    )


def state_url() -> str | None:
    from memlife.settings import settings  # this package stays light to import

    return settings().state


_lock = threading.Lock()
_open: dict[str, DynamoState] = {}


def current() -> DynamoState | None:
    """The configured AWS state backend (one per URL and process), or None (embedded)."""
    url = state_url()
    settings = parse_state_url(url)
    if settings is None or url is None:
        return None
    with _lock:
        if url not in _open:
            from memlife.state.dynamodb import DynamoState

            _open[url] = DynamoState(settings)
        return _open[url]


def uses_remote_state(store: object) -> DynamoState | None:
    """The AWS backend for this store: None for a SQLite store (its own file) or no setting."""
    if getattr(store, "connection", None) is not None:
        return None
    remote = current()
    if remote is not None:  # one table, one store (state/dynamodb.py): another is refused
        from memlife.stores import store_identity

        remote.check_store(store_identity(getattr(store, "url", None)))
    return remote
