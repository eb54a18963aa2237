"""One policy per version: the rules a version names are kept beside the receipts, once.

Receipts name the policy a run applied by its ``version``. A policy edited without a new
version (every TTL set to one day by a typo, or on purpose) deleted 1,423 records whose
receipts named the shipped default's version, and nothing kept the rules that were
applied. The first run that changes records under a version keeps the policy's text at
``policies/{version}.yaml`` in the receipts location (create-only). Any later run under
that version whose policy reads otherwise (compared as parsed rules, so a comment, the
key order or the description may change; versions a reader cannot tell apart, "V1" and
"v1 ", are one) is refused before its manifest is written, naming the version: a changed
policy gets a new version. A dry run changes nothing and is not checked: it previews an
edited policy. A reviewer reads the exact rules behind any receipt
from that file (its sha256 is the manifest's ``policy_sha256`` when the bytes agree).
"""

from __future__ import annotations

import hashlib

import yaml

from memlife.audit import ReceiptSink
from memlife.errors import PolicyError
from memlife.policy import Policy, policy_key


def check_policy(sink: ReceiptSink, policy: Policy, text: bytes, *, record: bool) -> str | None:
    """Refuse ``policy`` when its version names other rules in this receipts location;
    with ``record`` (a run that will change records), keep its text when it is the first.
    A dry run (``record`` False) changes nothing and previews an edited policy: it is not
    refused, and gets back the refusal an apply run would meet, to warn with."""
    key = policy_key(policy.version)
    kept = sink.get(key)
    if not record:
        if kept is not None and _rules(kept) != _rules_of(policy):
            return (f"policy version {policy.version!r} names other rules in the receipts "
                    f"({key}): an apply run under it would be refused; give it a new version")  # fmt: skip
        return None
    if kept is None:
        if sink.put_new(key, text, "application/yaml"):
            return None
        kept = sink.get(key)  # another run kept it first: compare with what it kept
        if kept is None:
            return None
    if _rules(kept) != _rules_of(policy):
        sha = hashlib.sha256(kept).hexdigest()[:12]
        raise PolicyError(
            f"policy version {policy.version!r} names other rules in the receipts "
            f"({key}, sha256 {sha}…): a changed policy needs a new `version`, so that "
            "receipts say which rules were applied"
        )
    return None


def _rules(text: bytes) -> dict[str, object] | None:
    """The kept policy as rules; None when it no longer parses (then it differs)."""
    try:
        return _rules_of(Policy.model_validate(yaml.safe_load(text)))
    except (yaml.YAMLError, ValueError):
        return None


def _rules_of(policy: Policy) -> dict[str, object]:
    """What a policy decides: its fields but the version's spelling and the description."""
    return policy.model_dump(mode="json", exclude={"version", "description"})
