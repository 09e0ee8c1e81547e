"""`backline console --llm gemini` as a user runs it: the installed command, the plugin
found through its entry point, `--gemini-base-url` exported to GOOGLE_GEMINI_BASE_URL,
and what a missing key says."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest

from tests.plugins.google import fake_gemini as fg
from tests.plugins.google.conftest import TEST_KEY
from tests.plugins.google.fake_gemini import FakeGeminiServer

BACKLINE = shutil.which("backline", path=str(Path(sys.executable).parent)) or "backline"


def cli_env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GEMINI_", "GOOGLE_", "BACKLINE_", "ANTHROPIC_"))
    }
    return {**env, "BACKLINE_PLUGINS": "google,anthropic", **extra}


def run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [BACKLINE, *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.timeout(60)
def test_backline_console_with_llm_gemini(gemini_server: FakeGeminiServer) -> None:
    gemini_server.push(fg.text("Hello from the fake Gemini."))
    child = pexpect.spawn(
        BACKLINE,
        [
            "console",
            "--plain",
            "--llm",
            "gemini",
            "-m",
            "gemini-test",
            "--gemini-base-url",
            gemini_server.url,
        ],
        env=cli_env(GEMINI_API_KEY=TEST_KEY),
        encoding="utf-8",
        timeout=30,
    )
    try:
        child.expect("backline console")
        child.sendline("hello")
        child.expect("agent: Hello from the fake Gemini.")
        child.sendline("/quit")
        child.expect("bye")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
    (request,) = gemini_server.requests
    assert request.model == "gemini-test"
    assert request.contents[-1] == {"role": "user", "parts": [{"text": "hello"}]}
    assert request.headers["x-goog-api-key"] == TEST_KEY


def test_without_a_key_the_console_says_what_to_do() -> None:
    out = run("console", "--plain", "--llm", "gemini", env=cli_env())
    assert out.returncode == 1
    assert "GEMINI_API_KEY is not set" in out.stderr
    assert "Traceback" not in out.stderr


def test_the_plugin_is_listed_with_its_llm_option_and_models() -> None:
    out = run("plugins", "--json", env=cli_env())
    assert out.returncode == 0, out.stderr
    (info,) = [p for p in json.loads(out.stdout) if p["name"] == "google"]
    assert info["distribution"] == "backline-google"
    assert (info["llms"], info["options"], info["status"]) == (
        ["gemini", "gemini-live"],
        ["--gemini-base-url"],
        "loaded",
    )
    models = run("models", env=cli_env())
    assert models.returncode == 0, models.stderr
    assert "gemini-2.5-flash (default)" in models.stdout
    assert "gemini-3.1-flash-live-preview (default)" in models.stdout


def test_llm_gemini_live_without_a_key_says_what_to_set() -> None:
    out = run("console", "--plain", "--llm", "gemini-live", env=cli_env())
    assert out.returncode == 1
    assert "GEMINI_API_KEY is not set" in out.stderr
    assert "Traceback" not in out.stderr
