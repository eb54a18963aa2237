"""The online library: runs in the agent's process (compaction, remember/recall)."""
