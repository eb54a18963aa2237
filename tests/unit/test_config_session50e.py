"""Audit 50e (session 50): settings as a careless operator writes them.

Each test sets the environment the way an operator's shell, unit file or deployment
template would and drives the real settings reader, the real CLI (`config show`,
`receipts list`) or the real consolidator; nothing is mocked.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import invoke

# -- 1. a refused setting printed its value whole: an endpoint's password with it ------------


@pytest.mark.parametrize(
    "url",
    [
        "http://minio:hunter6@minio.example:9000 ",  # a trailing space from a template
        "http://minio:hunter6@s3.amazonaws.com",  # AWS's own endpoint over plain http
    ],
)
def test_a_refused_endpoint_setting_names_the_variable_but_not_its_password(
    home: Path, url: str
) -> None:
    """Adversary: MEMLIFE_S3_ENDPOINT_URL holds a MinIO behind basic auth, with a stray
    space, or AWS's endpoint over http. Must hold: the refusal names the variable (exit 2)
    and, like `config show` and the state URL's own refusals (``parse_state_url``: "never an
    endpoint's password"), prints no password. Today the error ends ``(got 'http://minio:
    hunter6@...')``: the password goes to stderr, cron mail and CI logs."""
    code, _, err = invoke("config", "show", env={"MEMLIFE_S3_ENDPOINT_URL": url})
    assert code == 2
    assert "MEMLIFE_S3_ENDPOINT_URL" in err
    assert "hunter6" not in err


@pytest.mark.parametrize("how", ["env", "flag"])
def test_a_refused_receipts_url_prints_no_endpoint_password(home: Path, how: str) -> None:
    """Adversary: the receipts URL carries its endpoint with credentials
    (``?endpoint_url=http://u:pw@host``, the documented parameter) and is refused (AWS's
    own endpoint over http). Must hold: the one-line refusal names MEMLIFE_RECEIPTS or
    --receipts and prints no password. Today ``check_receipts`` prints the URL with ``!r``."""
    url = "s3://bucket/prefix?endpoint_url=http://u:hunter7@s3.amazonaws.com"
    if how == "env":
        code, _, err = invoke("receipts", "list", env={"MEMLIFE_RECEIPTS": url})
        assert "MEMLIFE_RECEIPTS" in err
    else:
        code, _, err = invoke("receipts", "list", "--receipts", url)
        assert "--receipts" in err
    assert code == 2
    assert "hunter7" not in err


def test_open_sink_refusal_prints_no_endpoint_password(home: Path) -> None:
    """The same URL given to a run without the CLI (a flow's ``receipts`` parameter): the
    ValueError ``open_sink`` raises reaches the flow run's failure message and events."""
    from memlife.audit import open_sink

    with pytest.raises(ValueError, match="endpoint_url") as err:
        open_sink("s3://bucket/prefix?endpoint_url=http://u:hunter8@s3.amazonaws.com")
    assert "hunter8" not in str(err.value)


def test_control_a_refused_state_url_prints_no_password_today() -> None:
    """Control: the state URL's refusals were masked already (session 48)."""
    from memlife.state import StateSettingsError, parse_state_url

    url = "dynamodb://t?region=us-east-1&parquet=s3://b/p&endpoint_url=http://u:hunter9@x.amazonaws.com"
    with pytest.raises(StateSettingsError) as err:
        parse_state_url(url)
    assert "hunter9" not in str(err.value)


# -- 2. a URL that does not parse was shown whole: its password with it -----------------------


def test_config_show_masks_the_password_of_a_url_that_does_not_parse(home: Path) -> None:
    """Adversary: a stray bracket in ANTHROPIC_BASE_URL (a proxy behind basic auth:
    ``https://u:pw@proxy]/``). Must hold: `config show` prints no secret ("secrets
    masked"). Today ``without_password`` catches urlsplit's ValueError ("Invalid IPv6
    URL") and returns the value as it is: the password printed in full."""
    code, out, err = invoke(
        "config", "show", "--json", env={"ANTHROPIC_BASE_URL": "https://u:hunter10@proxy]/"}
    )
    assert code == 0, err
    assert "hunter10" not in out


def test_control_a_url_that_parses_is_masked() -> None:
    from memlife.settings import without_password

    assert without_password("https://u:hunter11@proxy/") == "https://u:****@proxy/"
    assert without_password("not a url") == "not a url"


# -- 3. setting names in lower case: read by memlife, ignored by the SDK, typos never refused --


def test_a_lower_case_typo_of_a_setting_is_refused(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Adversary: a unit file written in lower case. ``memlife_lease_ttl_seconds=30`` is
    read (pydantic-settings matches names in any case), so an operator learns that lower
    case works; ``memlife_lease_ttl_second=30`` (a typo) is then dropped silently and the
    lease stays 120 s, the very typo README says is refused in capitals. Must hold: the
    typo is refused naming it."""
    from memlife.errors import SettingsError
    from memlife.settings import settings

    monkeypatch.setenv("memlife_lease_ttl_second", "30")
    with pytest.raises(SettingsError, match="memlife_lease_ttl_second"):
        settings()


def test_a_lower_case_anthropic_variable_is_not_shown_as_in_force(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Adversary: ``anthropic_base_url=http://proxy`` (lower case) beside the key: the
    operator means every memory to go through the company's proxy. memlife reads it (`config
    show` prints the proxy) but the Anthropic SDK, which sends the requests, reads only
    ``ANTHROPIC_BASE_URL``: memory content goes to api.anthropic.com. Likewise a lower-case
    key makes memlife choose the model consolidator whose client has no key. Must hold:
    what memlife says is in force is what the requests use: a spelling the SDK does not read
    is refused, naming it and the spelling to use."""
    from memlife.errors import SettingsError
    from memlife.settings import settings

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    monkeypatch.setenv("anthropic_base_url", "http://127.0.0.1:9/")
    with pytest.raises(SettingsError, match="anthropic_base_url.*ANTHROPIC_BASE_URL"):
        settings()


def test_control_what_settings_show_is_what_the_sdk_uses(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Control: in capitals, the base URL memlife shows is the one the client sends to."""
    from memlife.consolidate.anthropic import AnthropicConsolidator
    from memlife.settings import settings

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/")
    assert settings().anthropic_base_url == "http://127.0.0.1:9/"
    client = AnthropicConsolidator.from_env().client
    assert str(client.base_url) == "http://127.0.0.1:9/"


def test_control_a_capital_typo_is_refused_and_a_capital_name_read(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memlife.errors import SettingsError
    from memlife.settings import settings

    monkeypatch.setenv("MEMLIFE_LEASE_TTL_SECONDS", "30")
    assert settings().lease_ttl_seconds == 30.0
    monkeypatch.setenv("MEMLIFE_LEASE_TTL_SECOND", "30")
    with pytest.raises(SettingsError, match="MEMLIFE_LEASE_TTL_SECONDS"):
        settings()


# -- 4. a name with a stray space went elsewhere, silently ------------------------------------


@pytest.mark.parametrize(
    ("var", "value"),
    [
        ("MEMLIFE_CLOUDWATCH_NAMESPACE", "memlife "),  # metrics beside the dashboards' "memlife"
        ("MEMLIFE_MODEL_CALLS_LIMIT", "memlife-model-calls "),  # a limit that does not exist
        ("MEMLIFE_MODEL", " claude-sonnet-4-5"),
        ("MEMLIFE_CHAT_MODEL", "claude-sonnet-4-5 "),
        ("MEMLIFE_EVAL_CASES", "eval/cases.yaml "),
        ("MEMLIFE_MODEL_CACHE", "/var/cache/memlife "),
        ("ANTHROPIC_BASE_URL", "https://proxy.example/ "),
        ("MEMLIFE_MODEL_CALLS_LIMIT", "   "),
    ],
)
def test_a_setting_with_surrounding_space_is_refused(
    home: Path, monkeypatch: pytest.MonkeyPatch, var: str, value: str
) -> None:
    """Adversary: a template or a copy from a document leaves a space around a name.
    ``MEMLIFE_CLOUDWATCH_NAMESPACE="memlife "`` publishes every count to a second namespace
    (CloudWatch takes the space) while the dashboards and alarms watch ``memlife``;
    ``MEMLIFE_MODEL_CALLS_LIMIT="memlife-model-calls "`` names a Prefect limit that does not
    exist, which Prefect does not enforce: model calls are no longer bounded across workers.
    Must hold: refused naming the variable, as the store URL and the home are since audit
    44f ("'m.db ' is another file")."""
    from memlife.errors import SettingsError
    from memlife.settings import settings

    monkeypatch.setenv(var, value)
    with pytest.raises(SettingsError, match=var):
        settings()


def test_control_the_same_names_without_space_are_read(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memlife.settings import settings

    monkeypatch.setenv("MEMLIFE_CLOUDWATCH_NAMESPACE", "memlife")
    monkeypatch.setenv("MEMLIFE_MODEL_CALLS_LIMIT", "memlife-model-calls")
    monkeypatch.setenv("MEMLIFE_MODEL_CACHE", "/var/cache/memlife")
    s = settings()
    assert (s.cloudwatch_namespace, s.model_calls_limit) == ("memlife", "memlife-model-calls")
    assert s.model_cache == Path("/var/cache/memlife")


# -- 5. `config show` did not say where a value came from ------------------------------------


def _row(out: str, var: str) -> str:
    return next(ln for ln in out.splitlines() if var in ln)


def test_config_show_tells_a_value_set_in_the_environment_from_its_default(home: Path) -> None:
    """Adversary: an operator asks whether the lease TTL of a worker is the unit file's or
    memlife's own (a unit file setting ``MEMLIFE_LEASE_TTL_SECONDS=120`` that someone will
    later change, or a forgotten export). Must hold: `config show` says what is in force
    and where it came from. Today the two rows read the same, ``120.0``."""
    env = {"COLUMNS": "200"}
    code, unset, err = invoke("config", "show", env=env)
    assert code == 0, err
    code, set_, err = invoke("config", "show", env={**env, "MEMLIFE_LEASE_TTL_SECONDS": "120"})
    assert code == 0, err
    var = "MEMLIFE_LEASE_TTL_SECONDS"
    assert _row(unset, var) != _row(set_, var)
    assert "environment" in _row(set_, var) and "default" in _row(unset, var)


def test_control_config_show_json_keeps_its_shape(home: Path) -> None:
    """Control: --json stays one object of variable -> value (scripts read it)."""
    import json

    code, out, err = invoke("config", "show", "--json", env={"MEMLIFE_LEASE_TTL_SECONDS": "120"})
    assert code == 0, err
    assert json.loads(out)["MEMLIFE_LEASE_TTL_SECONDS"] == 120.0
