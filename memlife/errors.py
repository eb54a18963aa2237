"""Every memlife exception, with one base and machine-readable reason codes.

``MemlifeError`` carries a ``code`` (a ``Reason``; receipts and journals store it, so it
never holds memory content) and an ``exit_code`` the CLI uses when the error reaches it
(README "Exit codes": 1 failed, 2 bad usage or input). Each subclass keeps the built-in
base it always had (``ValueError`` for bad input, ``RuntimeError`` for failures), so code
that catches those still does; the modules that raised them re-export their names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from enum import StrEnum
from typing import Any, ClassVar

FAILED = 1  # the command failed
BAD_INPUT = 2  # bad usage or input


class Reason(StrEnum):
    """Reason codes of errors (not of lifecycle decisions: those are plan.py's)."""

    ERROR = "ERROR"  # no more specific code
    # stores
    STORE_ERROR = "STORE_ERROR"
    QUOTA_EXCEEDED = "QUOTA_EXCEEDED"
    THROTTLED = "THROTTLED"
    VALIDATION = "VALIDATION"
    NOT_FOUND = "NOT_FOUND"
    CONFLICT = "CONFLICT"
    SERVICE = "SERVICE"
    ACCESS_DENIED = "ACCESS_DENIED"
    SIDECAR_MISMATCH = "SIDECAR_MISMATCH"
    SIDECAR_UNAVAILABLE = "SIDECAR_UNAVAILABLE"
    CORRUPT_RECORD = "CORRUPT_RECORD"
    BAD_PAGE_TOKEN = "BAD_PAGE_TOKEN"
    # consolidation (each goes into the receipt of a rejected group)
    EMPTY_GROUP = "EMPTY_GROUP"
    SURVIVOR_NOT_IN_GROUP = "SURVIVOR_NOT_IN_GROUP"
    UNKNOWN_SOURCE = "UNKNOWN_SOURCE"
    UNGROUNDED_CLAIM = "UNGROUNDED_CLAIM"
    EMPTY_RESULT = "EMPTY_RESULT"
    CONTRADICTED_CLAIM = "CONTRADICTED_CLAIM"
    SCHEMA_INVALID = "SCHEMA_INVALID"
    MODEL_UNAVAILABLE = "MODEL_UNAVAILABLE"
    MODEL_REJECTED = "MODEL_REJECTED"
    MODEL_NOT_CONFIGURED = "MODEL_NOT_CONFIGURED"
    # input and state
    INVALID_RECORD = "INVALID_RECORD"
    INVALID_POLICY = "INVALID_POLICY"
    INVALID_EVALSET = "INVALID_EVALSET"
    INVALID_NAMESPACE = "INVALID_NAMESPACE"
    INVALID_ERASURE = "INVALID_ERASURE"
    INVALID_SETTING = "INVALID_SETTING"
    JOURNAL_STATE = "JOURNAL_STATE"
    RECEIPT_WRITE = "RECEIPT_WRITE"
    EMBEDDING_MODEL = "EMBEDDING_MODEL"
    SUMMARIZER = "SUMMARIZER"
    INJECTED_FAULT = "INJECTED_FAULT"
    LEASE_HELD = "LEASE_HELD"
    REMEMBER_REFUSED = "REMEMBER_REFUSED"
    OUTCOME_REFUSED = "OUTCOME_REFUSED"


class MemlifeError(Exception):
    """Base of every memlife exception. ``code``: a ``Reason`` (or, from a backend, the
    service's own code as a string); ``exit_code``: what the CLI exits with."""

    default_code: ClassVar[Reason] = Reason.ERROR
    exit_code: ClassVar[int] = FAILED

    def __init__(self, message: str = "", code: str | None = None):
        super().__init__(message)
        self.code: str = _reason(code) if code is not None else self.default_code


def _reason(code: str) -> str:
    """A known code as its ``Reason`` member (equal to the string either way)."""
    try:
        return Reason(code)
    except ValueError:
        return code


class InputError(MemlifeError, ValueError):
    """Bad input: the CLI exits 2."""

    exit_code = BAD_INPUT


class NotFoundError(InputError):
    """Nothing the request names exists, so nothing was started and no receipt written:
    the CLI exits 1, as every command's "not found" does (README "Exit codes")."""

    default_code = Reason.NOT_FOUND
    exit_code = FAILED


# -- stores --------------------------------------------------------------------------------
class StoreError(MemlifeError, RuntimeError):
    """A store-level failure that stops the current shard (e.g. quota exceeded)."""

    default_code = Reason.STORE_ERROR

    def __init__(self, message: str, code: str = Reason.STORE_ERROR):
        super().__init__(message, code)


class NotAStoreError(StoreError):
    """The file a store URL names is no memlife store (another application's SQLite
    database, not SQLite, or damaged): refused before any write, or, for damage only a
    shard's read reaches, when read (that shard stops). Bad input, as a missing store file
    is: the CLI exits 2 (README "Exit codes"; it exited 1, audit 51x4)."""

    exit_code = BAD_INPUT


class ShardStopped(MemlifeError, RuntimeError):
    """An applier's batch that a StoreError stopped part-way: ``results`` (operation id ->
    outcome or ItemFailure) for what the store did before it stopped, so those are
    journaled as done, not failed; the rest of the batch fails with ``error``'s code."""

    def __init__(self, error: StoreError, results: dict[str, Any]):
        super().__init__(str(error), error.code)
        self.error, self.results = error, results


class CorruptRecordError(StoreError):
    """A stored record that does not decode (bad input already in the store): names the
    record and the field. Its shard stops and is reported; the rest of the run goes on."""

    def __init__(self, record_id: str, field: str, reason: str):
        self.record_id, self.field, self.reason = record_id, field, reason
        super().__init__(
            f"record {record_id}: field '{field}': {reason}", code=Reason.CORRUPT_RECORD
        )


class BadPageToken(InputError):
    """The paging token was not produced by this store for this actor/namespace."""

    default_code = Reason.BAD_PAGE_TOKEN


# -- records, policy, evaluation sets, namespaces, erasure (bad input) ---------------------
_PLAIN_PART = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,40}|[0-9]{1,10}")


def field_place(parts: Iterable[object]) -> str:
    """A refused field's location for a message, a step at a time: a short plain name
    (``colour``, ``provenance.origin``) or an index as it is, any other key as ``<key>``.
    A key with spaces is a line's text where a key goes (a shifted column, a fact written
    as a key): memory content, which an error printed or logged must not carry (audit
    53cl; evaluation sets and a model's answer name such keys so since sessions 20, 42)."""
    return ".".join(str(p) if _PLAIN_PART.fullmatch(str(p)) else "<key>" for p in parts)


class RecordError(InputError):
    """A record failed validation; names the record id (if known), the field and why."""

    default_code = Reason.INVALID_RECORD

    def __init__(self, record_id: str | None, field: str, reason: str, line: int | None = None):
        self.record_id = record_id
        self.field = field
        self.reason = reason
        self.line = line
        where = f"line {line}: " if line is not None else ""
        super().__init__(f"{where}record {record_id or '<no id>'}: field '{field}': {reason}")

    def as_dict(self) -> dict[str, Any]:
        return {"line": self.line, "id": self.record_id, "field": self.field, "reason": self.reason}


class PolicyError(InputError):
    """A policy file is unreadable or invalid; the message names the file and the key."""

    default_code = Reason.INVALID_POLICY


class EvalSetError(InputError):
    """An evaluation file is unreadable or invalid; names the file and the case."""

    default_code = Reason.INVALID_EVALSET


class NamespaceError(InputError):
    """A namespace with an empty, `.` or `..` segment (or a control character)."""

    default_code = Reason.INVALID_NAMESPACE


class EraseError(InputError):
    """The request is malformed (no target, or ids of another actor)."""

    default_code = Reason.INVALID_ERASURE


class SettingsError(InputError):
    """A MEMLIFE_* environment variable does not parse; names the variable."""

    default_code = Reason.INVALID_SETTING


# -- failures ------------------------------------------------------------------------------
class ConsolidationError(MemlifeError, RuntimeError):
    """The group could not be consolidated; ``code`` goes into receipts (no content)."""

    def __init__(self, code: str, message: str = "", retryable: bool = False):
        super().__init__(f"{code}: {message}" if message else str(code), code)
        self.retryable = retryable
        # What the attempt cost, whatever its outcome (set by a model-calling consolidator):
        self.requests = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.usage_estimated = False  # the answer carried no usage: the tokens are estimates


class JournalStateError(MemlifeError, RuntimeError):
    """An illegal transition (e.g. RECEIPTED -> APPLIED): a bug, never swallowed."""

    default_code = Reason.JOURNAL_STATE


class ReceiptWriteError(MemlifeError, RuntimeError):
    """The sink refused or failed a write (network, permissions): evidence is not yet durable."""

    default_code = Reason.RECEIPT_WRITE


class ReceiptReadError(MemlifeError, RuntimeError):
    """A key that is there but does not read (S3 403: a KMS key or an object owner the
    reader's role may not use): a reviewer's finding, never the end of every check.
    ``code``: the service's own code (e.g. AccessDenied)."""

    def __init__(self, key: str, code: str) -> None:
        super().__init__(f"{key}: {code}", code)
        self.key = key


class EmbeddingModelError(MemlifeError, RuntimeError):
    """The bundled model or tokenizer is missing or not the pinned file."""

    default_code = Reason.EMBEDDING_MODEL


class SummarizerError(MemlifeError, RuntimeError):
    """The summariser produced nothing usable (empty, truncated, refused)."""

    default_code = Reason.SUMMARIZER


class OutcomeRefused(MemlifeError, RuntimeError):
    """A child batch's outcome file names something no outcome holds, or is unreadable:
    the parent counts that batch failed and never runs what the file names."""

    default_code = Reason.OUTCOME_REFUSED


class InjectedFault(MemlifeError, RuntimeError):
    """Raised at an armed fault point (memlife.faults; tests and drills only)."""

    default_code = Reason.INJECTED_FAULT


# Which errors deserve a retry with backoff (memlife/throttling.py re-exports it): here, where
# nothing of memlife is imported, so the tombstones' and the ledger's modules may ask too.
_THROTTLE_CODES = {
    "ThrottledException",
    "ThrottlingException",
    "Throttling",
    "TooManyRequestsException",
    "ProvisionedThroughputExceededException",
    "ThrottlingError",  # a DynamoDB transaction's cancellation reason
    "ProvisionedThroughputExceeded",  # the same on a provisioned table or index
    "TransactionConflict",  # another transaction on one of its items: try again later
    "RequestLimitExceeded",
    "SlowDown",
    "RateLimitError",
    "rate_limit_error",
    "overloaded_error",
    "429",
    "529",
    "THROTTLED",  # memlife's own code (memlife.foreign_errors keeps it for a library's)
}


def is_throttling(exc: BaseException | None) -> bool:
    """True for rate limiting / overload (worth a retry with backoff), False otherwise."""
    seen = 0
    while exc is not None and seen < 5:
        names = {type(exc).__name__, str(getattr(exc, "code", "") or "")}
        status = getattr(exc, "status_code", None)
        if status is not None:
            names.add(str(status))
        response = getattr(exc, "response", None)
        if isinstance(response, dict):  # botocore ClientError
            names.add(str(response.get("Error", {}).get("Code", "")))
            names |= {str(r.get("Code")) for r in response.get("CancellationReasons") or []}
        if names & _THROTTLE_CODES:
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False
