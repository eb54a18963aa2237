"""Session 48 (audit 48vii): `memlife config show` against an endpoint password given inside another URL."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import invoke

STATE = (
    "dynamodb://t?region=us-east-1&parquet=s3://b/p&endpoint_url=http://u:hunter2@127.0.0.1:5000"
)
RECEIPTS = "s3://b/p?endpoint_url=http://u:hunter3@127.0.0.1:9000"
STORE = "agentcore://mem-1?region=us-east-1&endpoint_url=http://u:hunter4@127.0.0.1:8000"


@pytest.mark.parametrize(
    ("var", "url"),
    [("MEMLIFE_STATE", STATE), ("MEMLIFE_RECEIPTS", RECEIPTS), ("MEMLIFE_STORE", STORE)],
)
def test_config_show_masks_an_endpoint_password_inside_a_url(
    home: Path, var: str, url: str
) -> None:
    """Adversary: the endpoint (a MinIO or DynamoDB proxy behind basic auth) is given as the
    documented ``endpoint_url=`` parameter of MEMLIFE_STATE, MEMLIFE_RECEIPTS or
    MEMLIFE_STORE instead of MEMLIFE_S3_ENDPOINT_URL, and an operator pastes `memlife config
    show --json` into a ticket. Must hold: no password is printed ("``memlife config show``
    prints the resolved values with secrets masked"), as for the same endpoint given as
    MEMLIFE_S3_ENDPOINT_URL (the control below). Today the whole URL is printed."""
    code, out, err = invoke("config", "show", "--json", env={var: url})
    assert code == 0, err
    assert "hunter" not in out


def test_config_show_masks_the_same_endpoint_given_as_its_own_setting(home: Path) -> None:
    """Control: the endpoint as MEMLIFE_S3_ENDPOINT_URL is masked today."""
    code, out, err = invoke(
        "config",
        "show",
        "--json",
        env={"MEMLIFE_S3_ENDPOINT_URL": "http://u:hunter5@127.0.0.1:9000"},
    )
    assert code == 0, err
    assert "hunter" not in out and "u:****@127.0.0.1:9000" in out
