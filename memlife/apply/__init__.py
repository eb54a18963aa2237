"""The operations engine: planned decisions become journaled, receipted changes. Crash-safe.

Every change runs one lifecycle (lifecycle.py; states in journal/base.py): plan the
operations (one transaction), apply each through the applier registered for its kind
(appliers/), receipt it create-only, mark it RECEIPTED. A rerun of the same run (same
run key) resumes each operation from its journaled state; a later run first drains the
retry queue (resume.py) through the same appliers. Shaped after AWS Powertools
idempotency: an explicit state machine, one idea per file.
"""

# Every applier registers itself on import: the package fills the registry (registry.py
# imports no applier, so the appliers can import it without a circle).
import memlife.apply.appliers  # noqa: F401
from memlife.apply.deletions import DeleteItem
from memlife.apply.executor import Executor
from memlife.apply.groups import StagedGroup
from memlife.apply.registry import APPLIERS, Applier, Result, applier_for
from memlife.apply.retry import next_retry
from memlife.apply.tally import Tally

__all__ = [
    "APPLIERS",
    "Applier",
    "DeleteItem",
    "Executor",
    "Result",
    "StagedGroup",
    "Tally",
    "applier_for",
    "next_retry",
]
