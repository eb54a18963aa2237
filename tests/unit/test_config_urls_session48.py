"""Session 48 (audit 48vii): state URLs, receipts URLs and MEMLIFE_HOME with hostile or careless parts.

Each value below was taken without a word, and a part of it was silently not what memlife
used (or the refusal named a value the operator never gave)."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlife.audit import receipts_url_problem
from memlife.state import StateSettingsError, parse_state_url
from tests.support.cli import invoke

BASE = "dynamodb://memlife-state?region=eu-west-1"


@pytest.mark.parametrize(
    ("url", "kept"),
    [
        # a path after the table: read as a prefix by the operator, dropped by memlife
        ("dynamodb://memlife-state/prod?region=eu-west-1&parquet=s3://b/p", None),
        # a '#' in the prefix ends the URL: the prefix is cut to 'team' and ttl_days is lost
        (BASE + "&parquet=s3://b/team#1&ttl_days=7", ("team#1", 7)),
        # percent-encoded as it should be: decoded, then cut at the '#' all the same
        (BASE + "&parquet=s3://b/team%231&ttl_days=7", ("team#1", 7)),
        (BASE + "&parquet=s3://b/team%3F1&ttl_days=7", ("team?1", 7)),
    ],
    ids=["path", "raw-hash", "encoded-hash", "encoded-question-mark"],
)
def test_no_part_of_a_state_url_is_silently_dropped(url: str, kept: tuple[str, int] | None) -> None:
    """Adversary: a state URL whose table is followed by a path, or whose Parquet prefix
    holds '#' or '?' (legal in an S3 key). Must hold: refused naming the URL, or read with
    every part (the prefix as written, the ttl_days given). Today the path is ignored, and
    the prefix 'team#1' becomes 'team': two deployments 'team#1' and 'team#2' then share one
    access ledger and one reports prefix (another store's reads scored as this store's),
    and the ttl_days after the '#' silently falls back to 30."""
    try:
        got = parse_state_url(url)
    except StateSettingsError:
        return
    assert got is not None and kept is not None, f"{url!r} read as {got}"
    assert (got.parquet_prefix, got.ttl_days) == kept


def test_a_plain_state_url_still_parses() -> None:
    """Control: every part read as written."""
    got = parse_state_url(BASE + "&parquet=s3://b/team-1/x&ttl_days=7")
    assert got is not None
    assert (got.table, got.region, got.parquet_bucket, got.parquet_prefix, got.ttl_days) == (
        "memlife-state", "eu-west-1", "b", "team-1/x", 7,
    )  # fmt: skip


@pytest.mark.parametrize("tail", ["?region=eu-west-1", "#prod"])
def test_a_file_receipts_url_with_a_query_or_fragment_is_refused(tmp_path: Path, tail: str) -> None:
    """Adversary: the operator moves receipts from ``s3://b/p?region=eu-west-1`` to a
    folder and keeps the query (or adds a '#' note). Must hold: refused, as a sqlite:///
    store URL with '?' or '#' is (``settings.store_url_problem``). Today the evidence goes
    to a folder named ``receipts?region=eu-west-1`` beside the one meant, and `receipts
    verify file://.../receipts` finds no run."""
    assert receipts_url_problem(f"file://{tmp_path}/receipts{tail}") is not None


def test_a_home_written_with_a_tilde_is_not_a_folder_named_tilde(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Adversary: MEMLIFE_HOME='~/memlife' where no shell expands it (a deployment's env,
    a systemd unit, a Dockerfile ENV, a quoted export). Must hold: refused naming the
    variable, or the user's home folder used. Today `remember` stores the memory under
    ``./~/memlife/memlife.db`` in whatever directory the process runs in (a second store no
    night looks at; `rm -rf ~` to clean it up is the next accident)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    for var in ("MEMLIFE_STORE", "MEMLIFE_RECEIPTS"):
        monkeypatch.delenv(var, raising=False)
    code, _, err = invoke("remember", "--actor", "u-1", "Likes tea.",
                          env={"MEMLIFE_HOME": "~/memlife"})  # fmt: skip
    assert not (tmp_path / "~").exists()
    assert code == 0 or "MEMLIFE_HOME" in err


@pytest.mark.parametrize("name", ["team#1", "what?"])
def test_a_home_folder_with_a_hash_is_used_or_refused_by_its_own_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """Adversary: MEMLIFE_HOME=/data/team#1 (a legal folder name), MEMLIFE_STORE unset.
    Must hold: the store under it is used, or the refusal names MEMLIFE_HOME. Today every
    command fails with "store URL 'sqlite:////data/team#1/memlife.db': a sqlite:/// URL
    takes no query string or fragment": a URL the operator never wrote, derived from the
    home, and no word of the variable to change."""
    for var in ("MEMLIFE_STORE", "MEMLIFE_RECEIPTS"):
        monkeypatch.delenv(var, raising=False)
    code, _, err = invoke("remember", "--actor", "u-1", "Likes tea.",
                          env={"MEMLIFE_HOME": str(tmp_path / name)})  # fmt: skip
    assert code == 0 or "MEMLIFE_HOME" in err, err


ENDPOINTS = [
    # no URL at all: MEMLIFE_S3_ENDPOINT_URL refuses it ("expected an http(s) URL"), these did not
    ("state", BASE + "&parquet=s3://b/p&endpoint_url=notaurl"),
    ("state", BASE + "&parquet=s3://b/p&s3_endpoint_url=127.0.0.1:9000"),
    ("receipts", "s3://b/p?endpoint_url=notaurl"),
    # AWS itself over plain http: the journal's payloads (replacement texts) and the
    # embedding cache travel unencrypted to a production region
    ("state", BASE + "&parquet=s3://b/p&endpoint_url=http://dynamodb.eu-west-1.amazonaws.com"),
    ("receipts", "s3://b/p?endpoint_url=http://s3.eu-west-1.amazonaws.com"),
    ("setting", "http://s3.eu-west-1.amazonaws.com"),
]


@pytest.mark.parametrize(("kind", "url"), ENDPOINTS, ids=[f"{k}-{i}" for i, (k, _) in
                                                          enumerate(ENDPOINTS)])  # fmt: skip
def test_an_endpoint_inside_a_url_is_checked_as_the_endpoint_setting_is(
    kind: str, url: str
) -> None:
    """Adversary: an endpoint given as a URL parameter instead of MEMLIFE_S3_ENDPOINT_URL:
    a bare host (no scheme), or AWS's own endpoint written with http://. Must hold: refused
    naming the URL, as the setting refuses a value that is no http(s) URL. Today the state
    URL and the receipts URL take either: the first fails later inside boto3 ("Invalid
    endpoint"), the second sends memory content and evidence to a production region
    unencrypted, without a word."""
    if kind == "state":
        with pytest.raises(StateSettingsError):
            parse_state_url(url)
    elif kind == "setting":
        from memlife.errors import SettingsError
        from memlife.settings import settings

        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("MEMLIFE_S3_ENDPOINT_URL", url)
            with pytest.raises(SettingsError, match="MEMLIFE_S3_ENDPOINT_URL"):
                settings()
    else:
        assert receipts_url_problem(url) is not None


def test_a_refused_state_url_never_prints_its_endpoint_password() -> None:
    """Adversary: a state URL whose endpoint carries credentials and has a typo elsewhere.
    Must hold: the refusal (printed by the CLI, kept in logs) masks the password, as
    `config show` does."""
    url = BASE + "&parquet=s3://b/p&endpoint_url=http://u:hunter2@127.0.0.1:1&bogus=1"
    with pytest.raises(StateSettingsError) as err:
        parse_state_url(url)
    assert "hunter2" not in str(err.value)
    assert "bogus" in str(err.value) and "u:****@127.0.0.1" in str(err.value)
