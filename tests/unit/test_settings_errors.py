"""A configuration error names the variables and the rules, never a value: secrets included
(pydantic's own message quotes every input), and as one JSON line when logs are JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.config import Settings
from gateway.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
SHORT_SECRET = "hunter2-short"
TWILIO_TOKEN = "twilio-token-abcdef-secret"
OPENAI_KEY = "sk-live-must-never-print"


def environment(**values: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith(("GATEWAY_", "TWILIO"))}
    env.pop("OPENAI_API_KEY", None)
    env.update(values)
    return env


@pytest.mark.parametrize(
    "bad",
    [
        {"GATEWAY_AUTH_SECRET": SHORT_SECRET},  # the auth rule (a model-level check)
        {"GATEWAY_AUTH_SECRET": SHORT_SECRET * 3, "GATEWAY_PORT": "not-a-port"},
        {"GATEWAY_AUTH_SECRET": SHORT_SECRET * 3, "GATEWAY_TRUSTED_PROXIES": "10.0.0.0/8,nope"},
    ],
)
def test_no_value_is_printed(monkeypatch: pytest.MonkeyPatch, bad: dict[str, str]) -> None:
    for key in list(os.environ):
        if key.upper().startswith("GATEWAY_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("TWILIO_AUTH_TOKEN", TWILIO_TOKEN)
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    for key, value in bad.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(ConfigError) as error:
        Settings.load()
    message = str(error.value)
    for secret in (SHORT_SECRET, TWILIO_TOKEN, OPENAI_KEY, "not-a-port"):
        assert secret not in message
    assert "GATEWAY_" in message
    assert error.value.__cause__ is None  # the pydantic error (with the values) is not chained


def test_the_message_names_the_variable_and_the_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GATEWAY_AUTH", "jwt")
    monkeypatch.setenv("GATEWAY_AUTH_SECRET", SHORT_SECRET)
    monkeypatch.setenv("GATEWAY_PORT", "70000")
    with pytest.raises(ConfigError, match=r"GATEWAY_PORT: Input should be less than"):
        Settings.load()


def test_serve_prints_one_json_line_without_the_secret() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "gateway", "serve"],
        cwd=REPO,
        env=environment(GATEWAY_AUTH_SECRET=SHORT_SECRET, TWILIO_AUTH_TOKEN=TWILIO_TOKEN),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    record = json.loads(lines[0])
    assert record["event"] == "gateway_failed"
    assert record["error"] == "ConfigError"
    assert "GATEWAY_AUTH_SECRET" in record["message"]
    assert SHORT_SECRET not in result.stderr
    assert TWILIO_TOKEN not in result.stderr


def test_console_logs_get_a_plain_line() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "gateway", "serve"],
        cwd=REPO,
        env=environment(GATEWAY_AUTH_SECRET=SHORT_SECRET, GATEWAY_LOG_FORMAT="console"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.startswith("gateway: 1 invalid setting: settings: GATEWAY_AUTH=jwt")
    assert SHORT_SECRET not in result.stderr


def test_token_refuses_a_lifetime_over_the_maximum() -> None:
    secret = "a-long-enough-secret-0123456789abcdef"
    env = environment(GATEWAY_AUTH_SECRET=secret, GATEWAY_TOKEN_MAX_LIFETIME_S="600")
    command = [sys.executable, "-m", "gateway", "token", "--sub", "alice", "--ttl"]
    too_long = subprocess.run(
        [*command, "3600"], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
    assert too_long.returncode == 2
    assert "GATEWAY_TOKEN_MAX_LIFETIME_S" in too_long.stderr
    fine = subprocess.run(
        [*command, "600"], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
    assert fine.returncode == 0
    assert fine.stdout.count(".") == 2  # a JWT
