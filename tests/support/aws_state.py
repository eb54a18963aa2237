"""AWS state backends for tests: moto in-process, or a moto server over HTTP."""

from __future__ import annotations

import os
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

from moto import mock_aws
from moto.server import ThreadedMotoServer

from memlife.state import parse_state_url
from memlife.state.dynamodb import DynamoState

CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def state_url(table: str = "memlife-state", endpoint: str | None = None) -> str:
    url = f"dynamodb://{table}?region=us-east-1&parquet=s3://memlife-state/parts"
    return url + (f"&endpoint_url={endpoint}" if endpoint else "")


def provision(url: str) -> DynamoState:
    """Create the table and the Parquet bucket (what deploy/state-table.yaml does)."""
    settings = parse_state_url(url)
    assert settings is not None
    state = DynamoState(settings)
    state.create_table()
    state.create_bucket()
    return state


@contextmanager
def moto_server() -> Iterator[str]:
    """A moto server on 127.0.0.1 (DynamoDB, S3, ...); yields its endpoint URL."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    try:
        yield endpoint
    finally:
        # moto's backends live in this process, shared by every server: the next test's
        # server would find this one's tables and items
        request = urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST")
        urllib.request.urlopen(request, timeout=10).close()
        server.stop()


@contextmanager
def aws_state(kind: str, table: str = "memlife-state") -> Iterator[tuple[str, DynamoState]]:
    """``inprocess``: moto's mock; ``server``: a moto server over HTTP. Yields (url, state)."""
    saved = {k: os.environ.get(k) for k in CREDENTIALS}
    os.environ.update(CREDENTIALS)
    try:
        if kind == "inprocess":
            with mock_aws():
                url = state_url(table)
                yield url, provision(url)
        else:
            with moto_server() as endpoint:
                url = state_url(table, endpoint)
                yield url, provision(url)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
