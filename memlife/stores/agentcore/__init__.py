"""Amazon Bedrock AgentCore Memory as a MemoryStore (boto3 ``bedrock-agentcore``).

``agentcore://MEMORY_ID?region=us-east-1&sidecar_table=memlife-sidecar`` (optional:
``endpoint_url``, ``control_endpoint_url``, ``sidecar_endpoint_url``, ``max_attempts``,
``strategy_id``). The full mapping, with reasons, is in ``docs/agentcore.md``; in short:

Record <-> AgentCore memory record
    ``content`` -> ``content.text`` (<= 16,000 chars, else a non-retryable VALIDATION item
    failure: content never goes to the sidecar); ``namespace`` -> ``namespaces[0]`` (one
    namespace per record; AgentCore's namespace pattern or a VALIDATION failure);
    ``created_at`` -> ``timestamp`` too; everything else -> ``metadata`` per ``FIELD_MAP``.

Ids
    AgentCore assigns ``memoryRecordId`` (``mem-...``, 40-50 chars) on create; no API takes
    a client id (``requestIdentifier`` only correlates items of one batch response, and
    ``clientToken`` only makes the whole request idempotent). So our id lives in metadata
    ``memlife_id`` and the DynamoDB sidecar maps it to the ``memoryRecordId``. A record
    AgentCore extracted by itself (no ``memlife_id``) is adopted with id = its
    ``memoryRecordId`` and lifecycle defaults.

Metadata values (<= 20 keys; strings 1..256 chars of ``[a-zA-Z0-9\\s._:/=+@-]``)
    Timestamps: ISO-8601 UTC, fixed width with microseconds (``2026-01-02T10:00:00.000000Z``:
    lossless, and lexical order = time order). Numbers: ``numberValue``. Enums: their
    value. A string that does not fit (disallowed or surrounding whitespace, empty, longer
    than 256, or itself starting with ``sha256:``) is written as ``sha256:<hex>`` of the
    value (so equality filters still work) and the value goes to the sidecar blob;
    ``provenance.supersedes`` (a list) always goes there. ``memlife_overflow`` then holds
    the blob's hash: metadata is the source of truth, and a sidecar blob is used only if
    its hash matches (the sidecar is written first, keeps a few blobs, so a failed or
    concurrent AgentCore write can never pair a record with another version's overflow).

Write path (``put_many``, ``set_status``)
    sidecar conditional write (version n -> n+1; a lost race is a CONFLICT item) ->
    BatchCreate (``clientToken`` = hash of the ids, content hashes and sidecar versions of
    the batch, so a botocore retry of a lost response creates nothing twice) or
    BatchUpdate -> sidecar records the new ``memoryRecordId``. A create interrupted between
    the two is ``pending`` in the sidecar; the next touch looks the record up by its
    indexed ``memlife_id`` before creating again.

Errors
    ``ThrottledException``: botocore standard retry, then our bounded, jittered retry of
    the throttled items; still throttled -> ``ItemFailure(THROTTLED, retryable)``.
    ``ServiceQuotaExceededException`` -> ``QuotaExceeded`` (a ``StoreError`` with code
    ``QUOTA_EXCEEDED`` carrying the partial ``BatchResult``): the shard stops.
    ``ValidationException`` on a batch -> the batch is bisected until the offending
    record(s) are named as non-retryable VALIDATION items. Per-item ``errorCode`` (HTTP
    style): 404 on delete = already deleted (``missing``), 404 on update = re-create, 429
    retried, 5xx retryable, 4xx not.

Modules: ``mapping`` (pure translation, limits), ``errors`` (error codes), ``transport``
(batching, item retry, bisection, the quota stop), ``namespaces`` (strategy templates),
``cache`` (read caches), ``store`` (``AgentCoreStore``); the sidecar is
``memlife.stores.agentcore_sidecar``.
"""

from __future__ import annotations

from memlife.stores.agentcore.errors import QuotaExceeded
from memlife.stores.agentcore.mapping import (
    DIGEST_PREFIX,
    FIELD_MAP,
    INDEXED_KEYS,
    MAX_CONTENT,
    MAX_INDEXED_KEYS,
    MAX_META_VALUE,
    MAX_METADATA_KEYS,
    MAX_PAGE,
    META_KEYS,
    META_VALUE_RE,
    NAMESPACE_RE,
    OVERFLOW_KEY,
    FieldMap,
    blob_hash,
    decode_metadata,
    encode_metadata,
    fits_metadata,
    iso,
    safe_value,
)
from memlife.stores.agentcore.store import AgentCoreStore

_blob_hash = blob_hash  # the name tests/fakes/agentcore.py imports

__all__ = [
    "DIGEST_PREFIX",
    "FIELD_MAP",
    "INDEXED_KEYS",
    "MAX_CONTENT",
    "MAX_INDEXED_KEYS",
    "MAX_METADATA_KEYS",
    "MAX_META_VALUE",
    "MAX_PAGE",
    "META_KEYS",
    "META_VALUE_RE",
    "NAMESPACE_RE",
    "OVERFLOW_KEY",
    "AgentCoreStore",
    "FieldMap",
    "QuotaExceeded",
    "blob_hash",
    "decode_metadata",
    "encode_metadata",
    "fits_metadata",
    "iso",
    "safe_value",
]
