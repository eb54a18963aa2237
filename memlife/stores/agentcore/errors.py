"""AgentCore errors -> memlife store errors and per-item codes.

Whole-request errors arrive as botocore ``ClientError``; per-item errors of a batch as an
HTTP-style ``errorCode`` in ``failedRecords``. Both map to the codes of ``ItemFailure``.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet

from botocore.exceptions import ClientError

from memlife.stores.base import BatchResult, StoreError

_STORE_CODES = {
    "ThrottledException": "THROTTLED",
    "AccessDeniedException": "ACCESS_DENIED",
    "ResourceNotFoundException": "NOT_FOUND",
    "ValidationException": "VALIDATION",
    "InvalidInputException": "VALIDATION",
    "ServiceException": "SERVICE",
}


class QuotaExceeded(StoreError):
    """ServiceQuotaExceededException: stop the shard. ``partial``: what was done before."""

    def __init__(self, message: str, partial: BatchResult | None = None):
        super().__init__(message, code="QUOTA_EXCEEDED")
        self.partial = partial or BatchResult()


def error_code(exc: ClientError) -> tuple[str, str]:
    """(service error code, message) of a ClientError."""
    e = exc.response.get("Error", {})
    return str(e.get("Code", "")), str(e.get("Message", ""))


# Codes whose message says what was refused, not what was sent. A validation message
# quotes the request ("Value '<the memory>' at 'content.text' failed to satisfy ..."), and
# the error reaches logs, receipts' runs and Prefect's state: those messages are withheld.
_MESSAGE_KEPT = frozenset({
    "ThrottledException", "AccessDeniedException", "ResourceNotFoundException",
    "ServiceQuotaExceededException", "ServiceException",
})  # fmt: skip


def kept_message(code: str, msg: str) -> str:
    """The service's message where it names no data, else a note that it is withheld."""
    return (
        msg
        if code in _MESSAGE_KEPT
        else "(the service's message is withheld: it may quote the request)"
    )


def store_error(exc: ClientError, what: str) -> StoreError:
    """A whole-request failure as the StoreError that stops the shard."""
    code, msg = error_code(exc)
    msg = kept_message(code, msg)
    if code == "ServiceQuotaExceededException":
        return QuotaExceeded(f"{what}: AgentCore quota exceeded: {msg}")
    mapped = _STORE_CODES.get(code, code or "STORE_ERROR")
    return StoreError(f"{what}: {code}: {msg}", code=mapped)


def check_advances(what: str, sent: str | None | AbstractSet[str | None], got: str | None) -> None:
    """Refuse a ``nextToken`` equal to the one the request carried: the cursor did not move,
    and asking again would serve the same page for ever (duplicates, a loop that never
    ends). botocore's paginators refuse the same ("the same next token received twice").
    ``sent`` may be every token the listing sent: one handed back later (A, B, A) loops
    as surely, and botocore does not see it (audit 53ii)."""
    if got and (got == sent if sent is None or isinstance(sent, str) else got in sent):
        raise StoreError(
            f"{what}: the service answered with a nextToken it was sent before (a cursor "
            "that does not advance); paging on would repeat the same pages",
            code="SERVICE",
        )


def item_code(http: int | None) -> tuple[str, bool]:
    """Per-item ``errorCode`` (HTTP style) -> (our code, retryable)."""
    if http == 400:
        return "VALIDATION", False
    if http == 402:
        return "QUOTA_EXCEEDED", False
    if http == 404:
        return "NOT_FOUND", False
    if http == 409:
        return "CONFLICT", True
    if http == 429:
        return "THROTTLED", True
    if http is None or http >= 500:
        return "SERVICE", True
    return f"HTTP_{http}", False
