"""The fault points a drill or a test may arm (``MEMLIFE_FAULT``, memlife/faults.py): a
module of its own, so the settings can check a point's name without importing the faults
(which read the settings)."""

from __future__ import annotations

POINTS = (
    "after_journal_write",
    "after_replacement_write",
    "after_supersede",
    "after_delete",
    "before_receipt",
    "after_receipt",
    "after_stage",
    "after_gate",
    "after_commit_groups",
    "after_shard_reported",
    "import_chunk",
    "import_commit",
)
# in the importer only: a nightly run never passes them
IMPORT_POINTS = ("import_chunk", "import_commit")
