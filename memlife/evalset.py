"""Evaluation sets for the regression gate: the file format (YAML or JSONL); the starter set
is memlife.evalset_starter.

A case says what recall must (and must not) return for one query of one actor:

    id: pref-u-000001-beverage         # unique in the set; the only thing receipts name
    kind: recent_preference            # free label (see CaseKind); informational
    query: "Switched to black coffee every morning"
    actor_id: u-000001
    namespace: /users/u-000001/preferences   # optional: scope recall to one namespace
    must_retrieve: [m-000001-00007, {fact: "black coffee"}]
    forbidden: [m-000001-00003, {claim: "drinks only green tea"}]
    impact: high                       # high | normal; a failed high-impact case blocks deletion
    min_result: 1.0                    # minimum recall@k over must_retrieve for the case to pass
    k: 5

Targets: a bare string is a record id; ``{id: ...}`` the same; ``{fact: ...}`` /
``{claim: ...}`` a piece of text that a retrieved record's content must contain (compared
case- and punctuation-insensitively). An id target is also satisfied by an active
replacement whose ``provenance.supersedes`` names it (transitively): consolidation
keeps a fact without keeping its original record. A forbidden id is matched exactly.
See docs/evaluation.md.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from memlife.errors import EvalSetError as EvalSetError  # moved; re-exported
from memlife.model import _RepeatedKey, _unique_keys
from memlife.policy import _UniqueKeyLoader
from memlife.text import normalise


class Impact(StrEnum):
    high = "high"
    normal = "normal"


class CaseKind(StrEnum):
    recent_preference = "recent_preference"  # the current preference is remembered
    superseded_fact = "superseded_fact"  # a superseded statement is not retrieved
    expired_fact = "expired_fact"  # an expired fact is not shown as active
    procedure = "procedure"  # a procedural instruction is intact
    erased = "erased"  # after erasure the targeted fact cannot be retrieved
    custom = "custom"


class Target(BaseModel):
    """One expected (or forbidden) item: a record id or a piece of text."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str | None = None
    text: str | None = None

    @model_validator(mode="after")
    def _one(self) -> Target:
        if (self.id is None) == (self.text is None):
            raise ValueError("a target is a record id or a fact/claim text, not both or neither")
        if self.text is not None and not normalise(self.text):
            raise ValueError("fact/claim text is blank")
        if self.id is not None and not self.id.strip():
            # no record has a blank id: a forbidden blank id would check nothing, every night
            raise ValueError("record id is blank")
        return self

    @property
    def label(self) -> str:
        """Content-free name for reports: the id, or 'text#n' (texts are never echoed)."""
        return self.id if self.id is not None else "text"

    def dump(self) -> str | dict[str, str]:
        return self.id if self.id is not None else {"fact": self.text or ""}


def _target(value: Any) -> Target:
    if isinstance(value, Target):
        return value
    if isinstance(value, str):
        return Target(id=value)
    if isinstance(value, dict):
        if set(value) == {"id"}:
            return Target(id=str(value["id"]))
        if len(value) == 1 and next(iter(value)) in ("fact", "claim", "text"):
            return Target(text=str(next(iter(value.values()))))
    # the shape, never the value: a target holds memory content
    shape = f"a mapping of {len(value)} key(s)" if isinstance(value, dict) else type(value).__name__
    raise ValueError(
        f"target is {shape}: use a record id, {{id: ..}}, {{fact: ..}} or {{claim: ..}}"
    )


class EvalCase(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1, max_length=256)
    query: str = Field(min_length=1)
    actor_id: str = Field(min_length=1)
    namespace: str | None = None
    kind: CaseKind = CaseKind.custom
    must_retrieve: list[Target] = Field(default_factory=list)
    forbidden: list[Target] = Field(default_factory=list)
    impact: Impact = Impact.normal
    min_result: float = Field(default=1.0, ge=0, le=1)
    k: int = Field(default=5, ge=1, le=100)
    threshold: float | None = Field(default=None, ge=-1, le=1)  # cosine floor; None: recall default
    # Optional checks of a model's final answer (run only when a model is configured).
    answer_must_include: list[str] = Field(default_factory=list)
    answer_must_not_include: list[str] = Field(default_factory=list)

    @field_validator("must_retrieve", "forbidden", mode="before")
    @classmethod
    def _targets(cls, v: Any) -> list[Target]:
        if v is None:
            return []
        if not isinstance(v, list):
            v = [v]
        return [_target(x) for x in v]

    @model_validator(mode="after")
    def _something(self) -> EvalCase:
        if not self.must_retrieve and not self.forbidden:
            raise ValueError("a case needs must_retrieve or forbidden targets")
        return self

    def dump(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "kind": self.kind.value,
            "query": self.query,
            "actor_id": self.actor_id,
        }
        if self.namespace:
            out["namespace"] = self.namespace
        if self.must_retrieve:
            out["must_retrieve"] = [t.dump() for t in self.must_retrieve]
        if self.forbidden:
            out["forbidden"] = [t.dump() for t in self.forbidden]
        out.update(impact=self.impact.value, min_result=self.min_result, k=self.k)
        if self.threshold is not None:
            out["threshold"] = self.threshold
        return out


def _part(loc: object) -> str:
    """One step of a validation error's location: a field name or an index, else ``<key>``."""
    if isinstance(loc, int) or loc in EvalCase.model_fields or loc in Target.model_fields:
        return str(loc)
    return "<key>"


def parse_cases(items: Iterable[Any], source: str = "<cases>") -> list[EvalCase]:
    cases: list[EvalCase] = []
    seen: set[str] = set()
    for n, item in enumerate(items, start=1):
        cid = item.get("id") if isinstance(item, dict) else None
        try:
            case = EvalCase.model_validate(item)
        except ValidationError as exc:
            err = exc.errors(include_url=False)[0]
            # a key the model does not know is named by its place, not its text (a typo in
            # a key, or a value pasted where a key goes, may be memory content)
            loc = ".".join(_part(p) for p in err["loc"]) or "<case>"
            if err["loc"][:1] == ("id",) or not isinstance(cid, str):
                cid = None  # a refused id may be content pasted one place down: its place
            raise EvalSetError(f"{source}: case {cid or n}: {loc}: {err['msg']}") from None
        if case.id in seen:
            raise EvalSetError(f"{source}: case id {case.id!r} appears twice")
        seen.add(case.id)
        cases.append(case)
    return cases


def read_source(location: str | Path) -> tuple[str, str]:
    """(text, name) from a path, ``file://path`` or ``s3://bucket/key?endpoint_url=..&region=..``."""
    loc = str(location)
    if loc.startswith("s3://"):
        from urllib.parse import parse_qs, urlparse

        from botocore.exceptions import BotoCoreError, ClientError

        from memlife.audit import S3Sink
        from memlife.settings import settings

        u = urlparse(loc)
        q = {k: v[-1] for k, v in parse_qs(u.query).items()}
        key = u.path.lstrip("/")
        name = f"s3://{u.netloc}/{key}"
        endpoint = q.get("endpoint_url") or settings().s3_endpoint_url
        try:
            body = S3Sink(u.netloc, endpoint_url=endpoint, region=q.get("region")).get(key)
        except (BotoCoreError, ClientError) as exc:
            raise EvalSetError(f"{name}: {type(exc).__name__}") from None
        if body is None:
            raise EvalSetError(f"{name}: no such object")
        return _text(body, name), name
    p = Path(loc.removeprefix("file://"))
    try:
        return _text(p.read_bytes(), str(p)), str(p)
    except OSError as exc:
        raise EvalSetError(f"{p}: {exc.strerror or exc}") from None


def _text(body: bytes, name: str) -> str:
    """The set as text: UTF-8 (a byte-order mark is read past, as YAML does), else an
    EvalSetError naming the file and byte, never a bare UnicodeDecodeError (a set saved
    as UTF-16 or Latin-1: audit 51iii)."""
    try:
        return body.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise EvalSetError(f"{name}: not UTF-8 text (at byte {exc.start})") from None


def load_cases(path: str | Path) -> list[EvalCase]:
    """YAML (a list, or a mapping with ``cases:``) or JSONL (one case per line), from a
    file or ``s3://bucket/key``."""
    text, name = read_source(path)
    suffix = Path(name.split("?")[0]).suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        items = []
        for n, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:  # a key written twice is refused (json keeps the last value silently)
                    items.append(json.loads(line, object_pairs_hook=_unique_keys))
                except json.JSONDecodeError as exc:
                    raise EvalSetError(f"{name}: line {n}: malformed JSON: {exc.msg}") from None
                except RecursionError:  # past the parser's depth: no case is nested so
                    raise EvalSetError(f"{name}: line {n}: nested too deeply") from None
                except _RepeatedKey as exc:
                    raise EvalSetError(f"{name}: line {n}: {_key(exc.key)} repeated") from None
        return _some(parse_cases(items, name), name)
    try:  # the policy's loader: a key written twice is refused, not silently the last
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader)
    except yaml.YAMLError as exc:
        raise EvalSetError(f"{name}: not valid YAML: {_where(exc)}") from None
    except RecursionError:  # past the parser's depth (audit 51iii)
        raise EvalSetError(f"{name}: not valid YAML: nested too deeply") from None
    if isinstance(data, dict):
        # a top-level key the format does not know (``defaults:``) would be ignored
        unknown = sorted((k for k in data if k != "cases"), key=str)
        if unknown:
            keys = ", ".join(_key(k) for k in unknown)
            raise EvalSetError(f"{name}: unknown top-level {keys}: only 'cases:' is read")
        data = data.get("cases")
    if not isinstance(data, list):
        raise EvalSetError(f"{name}: expected a list of cases (or a mapping with 'cases:')")
    return _some(parse_cases(data, name), name)


def _where(exc: yaml.YAMLError) -> str:
    """The YAML problem and its line and column, without the snippet PyYAML quotes: a case
    holds memory content (queries, expected facts), and this message reaches logs and
    Prefect's state."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or type(exc).__name__
    repeated = re.fullmatch(r"key (.*) repeated \(line \d+\)", problem)
    if repeated:  # _UniqueKeyLoader quotes the key: named only when it is a field's name
        problem = f"{_key(repeated.group(1).strip(chr(39)))} repeated"
    return f"{problem} (line {mark.line + 1}, column {mark.column + 1})" if mark else problem


def _key(key: object) -> str:
    """A key for an error message: named when it is a short identifier (``impact``,
    ``defaults``), else "a key": one with spaces may be a value pasted where a key goes,
    memory content."""
    named = isinstance(key, str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,40}", key)
    return f"key {key!r}" if named else "a key"


def cases_digest(cases: Sequence[EvalCase]) -> str:
    """sha256 over the cases as parsed (not the file's bytes: a reformatted file is the same
    set). The consolidation memo keys a gate-blocked group by it: a changed set re-opens it."""
    canon = json.dumps([c.model_dump(mode="json") for c in cases], sort_keys=True)
    return hashlib.sha256(canon.encode()).hexdigest()


def _some(cases: list[EvalCase], name: str) -> list[EvalCase]:
    """An empty set would satisfy a required gate while checking nothing."""
    if not cases:
        raise EvalSetError(f"{name}: no cases (write some with `memlife eval init`)")
    return cases


def dump_cases(cases: Sequence[EvalCase], path: str | Path) -> Path:
    """Write the set whole or not at all: written beside its place, then renamed there. In
    place, a write failing part way (a full disk) left the head of the new set where a
    reviewed one had been, and cut at a line's end it loads as a smaller set (audit 52i)."""
    from memlife.export_files import Staged

    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    if p.suffix.lower() in (".jsonl", ".ndjson"):
        text = "".join(json.dumps(c.dump()) + "\n" for c in cases)
    else:
        header = (
            "# memlife evaluation set (docs/evaluation.md). Derived from the store by\n"
            "# `memlife eval init`; review it: these queries and facts are yours to edit.\n"
        )
        body = yaml.safe_dump(
            {"cases": [c.dump() for c in cases]}, sort_keys=False, allow_unicode=True
        )
        text = header + body
    staged = Staged()
    try:
        staged.open(p).write(text)
        staged.commit()
    finally:
        staged.discard()
    return p


# -- a starter set derived from the store ----------------------------------------------------
