"""Messages API history builders for the compaction tests: a user and an assistant turn."""

from __future__ import annotations

from typing import Any

from memlife.online.compaction import Message


def U(content: Any) -> Message:
    return {"role": "user", "content": content}


def A(content: Any) -> Message:
    return {"role": "assistant", "content": content}
