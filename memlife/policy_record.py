"""One policy per version: the rules a version names are kept beside the receipts, once.

Receipts name the policy a run applied by its ``version``. A policy edited without a new
version (every TTL set to one day by a typo, or on purpose) deleted 1,423 records whose
receipts named the shipped default's version, and nothing kept the rules that were
applied. The first run that changes records under a version keeps the policy's text at
``policies/{version}.yaml`` in the receipts location (create-only). Any later run under
that version whose policy reads otherwise (compared as parsed rules, so a comment or the
key order may change) is refused before its manifest is written, naming the version:
a changed policy gets a new version. A reviewer reads the exact rules behind any receipt
from that file (its sha256 is the manifest's ``policy_sha256`` when the bytes agree).
"""

from __future__ import annotations

import hashlib
from urllib.parse import quote

import yaml

from memlife.audit import ReceiptSink
from memlife.errors import PolicyError
from memlife.policy import Policy


def policy_key(version: str) -> str:
    return f"policies/{quote(version, safe='')}.yaml"


def check_policy(sink: ReceiptSink, policy: Policy, text: bytes, *, record: bool) -> None:
    """Refuse ``policy`` when its version names other rules in this receipts location;
    with ``record`` (a run that will change records), keep its text when it is the first."""
    key = policy_key(policy.version)
    kept = sink.get(key)
    if kept is None:
        if not record or sink.put_new(key, text, "application/yaml"):
            return
        kept = sink.get(key)  # another run kept it first: compare with what it kept
        if kept is None:
            return
    if _rules(kept) != policy:
        sha = hashlib.sha256(kept).hexdigest()[:12]
        raise PolicyError(
            f"policy version {policy.version!r} names other rules in the receipts "
            f"({key}, sha256 {sha}…): a changed policy needs a new `version`, so that "
            "receipts say which rules were applied"
        )


def _rules(text: bytes) -> Policy | None:
    """The kept policy as rules; None when it no longer parses (then it differs)."""
    try:
        return Policy.model_validate(yaml.safe_load(text))
    except (yaml.YAMLError, ValueError):
        return None
