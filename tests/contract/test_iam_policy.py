"""deploy/iam-policy.json grants exactly the AWS actions memlife's code calls.

A static scan of memlife/ (ast): every boto3 client the code builds (``.client("svc")``)
names a service; every method called on a client-like receiver (``self.client.x``,
``self.control.x``, ``client.x``, ...) that is an operation of one of those services, plus
the operations behind ``get_paginator("...")`` and ``get_waiter("...")``, is an API call.
botocore's service model maps each to its operation name and the service's signing name
(the IAM prefix): ``list_memory_records`` -> ``bedrock-agentcore:ListMemoryRecords``.
The few operations whose IAM action has another name (S3 ``ListObjectsV2`` ->
``s3:ListBucket``) are mapped explicitly.

The policy must grant every action called, and nothing beyond them except the listed
implied permissions (SSE-KMS on the receipts bucket) and deliberate provisioning-only
calls that the runtime role must NOT have.
"""

from __future__ import annotations

import ast
import json
from collections import defaultdict
from functools import cache
from pathlib import Path

import boto3
import pytest

REPO = Path(__file__).resolve().parents[2]
POLICY = REPO / "deploy" / "iam-policy.json"

# IAM action names that differ from the API operation name
IAM_NAME = {
    ("s3", "ListObjectsV2"): "ListBucket",
    ("s3", "ListObjects"): "ListBucket",
    ("s3", "HeadObject"): "GetObject",
    ("s3", "HeadBucket"): "ListBucket",
    ("s3", "ListObjectVersions"): "ListBucketVersions",
}

# receivers whose attribute calls are boto3 client calls
CLIENT_NAMES = {"client", "control", "s3", "ddb", "dynamodb", "cloudwatch", "cw", "_client"}

# called only by setup helpers (tests, provisioning scripts): the runtime role must not
# hold them. (module, function qualname) -> why
PROVISIONING = {
    (
        "memlife/stores/agentcore_sidecar.py",
        "Sidecar.create_table",
    ): "creates the sidecar table: done once by the deployer (CloudFormation/IaC), not the job",
    (
        "memlife/state/dynamodb.py",
        "DynamoState.create_table",
    ): "creates the state table (deploy/state-table.yaml does it in production), not the job",
    (
        "memlife/state/dynamodb.py",
        "DynamoState.create_bucket",
    ): "creates the Parquet bucket: the deployer's, not the job's",
}

# granted without a direct API call: the service calls them on our behalf
IMPLIED = {
    "kms:GenerateDataKey": "S3 SSE-KMS: PutObject into the receipts bucket",
    "kms:Decrypt": "S3 SSE-KMS: GetObject from the receipts bucket",
    "dynamodb:ConditionCheckItem": "a ConditionCheck inside TransactWriteItems "
    "(inferred/dynamodb.py: an entry goes only while its record holds another key)",
}
# IAM prefixes that differ from botocore's signing name
IAM_PREFIX = {"monitoring": "cloudwatch"}


@cache
def _client(service: str):
    return boto3.session.Session(region_name="us-east-1").client(
        service, aws_access_key_id="x", aws_secret_access_key="x"
    )


def _receiver_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return None


def _str_arg(call: ast.Call) -> str | None:
    if call.args and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str):
        return call.args[0].value
    return None


class _Scan(ast.NodeVisitor):
    def __init__(self, rel: str):
        self.rel, self.stack = rel, []
        self.services: set[str] = set()
        self.calls: list[tuple[str, str, str, str]] = []  # (kind, name, file, qualname)

    def _visit_scope(self, node):
        self.stack.append(node.name)
        self.generic_visit(node)
        self.stack.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _visit_scope

    def visit_Call(self, node: ast.Call):
        f = node.func
        if isinstance(f, ast.Attribute):
            recv = _receiver_name(f.value)
            where = ".".join(self.stack)
            if f.attr == "client" and _str_arg(node):  # boto3.client("s3"), session.client(...)
                self.services.add(_str_arg(node))
            elif recv in CLIENT_NAMES or (recv or "").endswith("_client"):
                if f.attr in ("get_paginator", "get_waiter") and _str_arg(node):
                    self.calls.append((f.attr, _str_arg(node), self.rel, where))
                else:
                    self.calls.append(("call", f.attr, self.rel, where))
        for arg in node.args:  # a client method handed on to be called (unprocessed.responses)
            recv = _receiver_name(arg.value) if isinstance(arg, ast.Attribute) else None
            if recv in CLIENT_NAMES or (recv or "").endswith("_client"):
                self.calls.append(("call", arg.attr, self.rel, ".".join(self.stack)))
        self.generic_visit(node)


def scan() -> tuple[dict[str, set[tuple[str, str]]], set[str]]:
    """IAM action -> {(file, function)} for every AWS call in memlife/; and the services."""
    scans = []
    for path in sorted((REPO / "memlife").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        s = _Scan(rel)
        s.visit(ast.parse(path.read_text(), filename=rel))
        scans.append(s)
    services = set().union(*(s.services for s in scans))
    found: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for s in scans:
        for kind, name, rel, where in s.calls:
            hits = []
            for svc in sorted(services):
                c = _client(svc)
                if kind == "call":
                    op = c.meta.method_to_api_mapping.get(name)
                elif kind == "get_paginator":
                    op = c.meta.method_to_api_mapping.get(name)
                else:  # get_waiter: the operation the waiter polls
                    op = c.get_waiter(name).config.operation if name in c.waiter_names else None
                if op:
                    signing = c.meta.service_model.signing_name
                    hits.append((IAM_PREFIX.get(signing, signing), op))
            prefixes = {p for p, _ in hits}
            assert len(prefixes) <= 1, f"{rel}:{where} {name}: ambiguous across {prefixes}"
            for prefix, op in hits:
                found[f"{prefix}:{IAM_NAME.get((prefix, op), op)}"].add((rel, where))
    return found, services


def _statements() -> list[dict]:
    doc = json.loads(POLICY.read_text())
    assert doc["Version"] == "2012-10-17"
    return doc["Statement"]


def granted() -> set[str]:
    out: set[str] = set()
    for st in _statements():
        assert st["Effect"] == "Allow", st
        assert "NotAction" not in st and "NotResource" not in st, st
        actions = st["Action"] if isinstance(st["Action"], list) else [st["Action"]]
        for a in actions:
            assert "*" not in a, f"wildcard action {a}"
            out.add(a)
    return out


def called() -> set[str]:
    found, _ = scan()
    runtime = {a for a, sites in found.items() if any(site not in PROVISIONING for site in sites)}
    return runtime


def test_scan_sees_the_code_we_know_about():
    found, services = scan()
    assert {"s3", "bedrock-agentcore", "bedrock-agentcore-control", "dynamodb"} <= services
    for action in (
        "bedrock-agentcore:ListMemoryRecords",
        "bedrock-agentcore:BatchDeleteMemoryRecords",
        "bedrock-agentcore:GetMemory",
        "s3:PutObject",
        "s3:ListBucket",
        "dynamodb:Query",
        "cloudwatch:PutMetricData",
    ):
        assert action in found, sorted(found)
    for module, qualname in PROVISIONING:  # the exemption must still point at real code
        assert any((module, qualname) in sites for sites in found.values()), (module, qualname)


def test_every_called_action_is_granted():
    missing = called() - granted()
    assert not missing, f"deploy/iam-policy.json lacks {sorted(missing)}"


def test_nothing_more_is_granted():
    extra = granted() - called() - set(IMPLIED)
    assert not extra, f"deploy/iam-policy.json grants actions the code never calls: {sorted(extra)}"


def test_provisioning_calls_are_not_granted():
    found, _ = scan()
    prov = {a for a, sites in found.items() if sites <= set(PROVISIONING)}
    assert prov, "expected the sidecar's create_table to be found"
    assert not (prov & granted()), sorted(prov & granted())


def test_resources_and_conditions_are_scoped():
    for st in _statements():
        resources = st["Resource"] if isinstance(st["Resource"], list) else [st["Resource"]]
        actions = st["Action"] if isinstance(st["Action"], list) else [st["Action"]]
        services = {a.split(":")[0] for a in actions}
        assert len(services) == 1, f"one service per statement: {st['Sid']}"
        (service,) = services
        if service == "cloudwatch":  # PutMetricData has no resource: a namespace condition
            assert resources == ["*"]
            assert st["Condition"]["StringEquals"]["cloudwatch:namespace"]
            continue
        assert "*" not in resources, f"{st['Sid']}: unscoped resource"
        if service == "bedrock-agentcore":
            assert all(
                r.startswith("arn:aws:bedrock-agentcore:") and ":memory/" in r for r in resources
            ), resources
        if service == "s3" and "s3:ListBucket" in actions:
            assert st["Condition"]["StringLike"]["s3:prefix"], st
        if service == "s3" and "s3:ListBucket" not in actions:
            assert all(r.endswith("_PREFIX}/*") for r in resources), resources
        if service == "kms":
            assert st["Condition"]["StringEquals"]["kms:ViaService"], st


@pytest.mark.parametrize("action", sorted(IMPLIED))
def test_allowances_are_documented(action):
    assert action in granted(), f"{action} is listed as granted but is not in the policy"
