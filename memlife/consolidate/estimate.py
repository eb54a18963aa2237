"""What a consolidation would cost with a model, without calling one (dry runs)."""

from __future__ import annotations

import json
from functools import cache

from memlife.consolidate.base import Group
from memlife.consolidate.prompts import request_chars, tool_definition

CHARS_PER_TOKEN = 4  # a rough, documented ratio for English text under Claude's tokenizer


def estimate_input_tokens(group: Group) -> int:
    """Tokens of the request the Anthropic consolidator would send for ``group``."""
    chars = request_chars(group) + _tool_chars()  # = len of build_messages' texts (a test)
    return -(-chars // CHARS_PER_TOKEN)


@cache
def _tool_chars() -> int:
    # The tool's JSON schema is the same for every request; pydantic builds it anew per
    # call (about 6 ms), which was over a third of a default dry run's time.
    return len(json.dumps(tool_definition()))
