"""memlife: keep an AI agent's memory true over time.

The public API (imported lazily, so ``import memlife`` and the CLI's ``--help`` stay fast)::

    from memlife import Memory, AsyncMemory, compact

See README.md, "As a library".
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS = {
    "Memory": "memlife.api",
    "AsyncMemory": "memlife.api",
    "Remembered": "memlife.api",
    "Recollection": "memlife.api",
    "compact": "memlife.online.compaction",
    "CompactionResult": "memlife.online.compaction",
    "Conversation": "memlife.online.compaction",
    "Summarizer": "memlife.online.compaction",
    "AnthropicSummarizer": "memlife.online.compaction",
    "TokenCounter": "memlife.online.compaction",
    "InputError": "memlife.errors",
    "RememberRefused": "memlife.online.memory",
    "MemoryRecord": "memlife.model",
    "MemoryType": "memlife.model",
    "Source": "memlife.model",
    "Status": "memlife.model",
    "RetentionClass": "memlife.model",
    "Provenance": "memlife.model",
    "MemoryStore": "memlife.stores.base",
    "open_store": "memlife.stores",
}

__all__ = [
    "__version__",
    "Memory",
    "AsyncMemory",
    "Remembered",
    "Recollection",
    "compact",
    "CompactionResult",
    "Conversation",
    "Summarizer",
    "AnthropicSummarizer",
    "TokenCounter",
    "InputError",
    "RememberRefused",
    "MemoryRecord",
    "MemoryType",
    "Source",
    "Status",
    "RetentionClass",
    "Provenance",
    "MemoryStore",
    "open_store",
]


if TYPE_CHECKING:
    from memlife.api import AsyncMemory, Memory, Recollection, Remembered
    from memlife.errors import InputError
    from memlife.model import MemoryRecord, MemoryType, Provenance, RetentionClass, Source, Status
    from memlife.online.compaction import (
        AnthropicSummarizer,
        CompactionResult,
        Conversation,
        Summarizer,
        TokenCounter,
        compact,
    )
    from memlife.online.memory import RememberRefused
    from memlife.stores import open_store
    from memlife.stores.base import MemoryStore


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'memlife' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # later look-ups skip this hook
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
