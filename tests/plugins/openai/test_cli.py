"""`backline console --llm openai` as a user runs it: the installed command, the plugin
found through its entry point, `--base-url` exported to OPENAI_BASE_URL."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest

from tests.plugins.openai import fake_openai as fo
from tests.plugins.openai.fake_openai import FakeOpenAIServer

BACKLINE = shutil.which("backline", path=str(Path(sys.executable).parent)) or "backline"


def cli_env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OPENAI_", "BACKLINE_", "GROQ_", "ANTHROPIC_"))
    }
    return {**env, "BACKLINE_PLUGINS": "openai,anthropic", **extra}


@pytest.mark.timeout(60)
def test_backline_console_with_llm_openai_and_base_url(openai_server: FakeOpenAIServer) -> None:
    openai_server.push(fo.text("Hello from the fake endpoint."))
    child = pexpect.spawn(
        BACKLINE,
        [
            "console",
            "--plain",
            "--llm",
            "openai",
            "-m",
            "llama3.2",
            "--base-url",
            openai_server.url,
        ],
        env=cli_env(),
        encoding="utf-8",
        timeout=30,
    )
    try:
        child.expect("backline console")
        child.sendline("hello")
        child.expect("agent: Hello from the fake endpoint.")
        child.sendline("/quit")
        child.expect("bye")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
    (request,) = openai_server.requests
    assert request.body["model"] == "llama3.2"
    assert request.messages[-1] == {"role": "user", "content": "hello"}
    assert request.api_key == "unused"  # a loopback endpoint needs no key


def run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [BACKLINE, *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_a_hosted_endpoint_without_its_key_says_what_to_do() -> None:
    out = run(
        "console",
        "--plain",
        "--llm",
        "openai",
        "-m",
        "llama-3.3-70b-versatile",
        "--base-url",
        "https://api.groq.com/openai/v1",
        env=cli_env(),
    )
    assert out.returncode == 1
    assert "GROQ_API_KEY is not set" in out.stderr
    assert "Traceback" not in out.stderr


def test_a_local_endpoint_without_a_model_says_what_to_do() -> None:
    out = run(
        "console",
        "--plain",
        "--llm",
        "openai",
        env=cli_env(OPENAI_BASE_URL="http://localhost:11434/v1"),
    )
    assert out.returncode == 1
    assert "no model named for http://localhost:11434/v1: pass -m MODEL" in out.stderr


def test_the_plugin_is_listed_with_its_llm_and_option() -> None:
    out = run("plugins", "--json", env=cli_env())
    assert out.returncode == 0, out.stderr
    (info,) = [p for p in json.loads(out.stdout) if p["name"] == "openai"]
    assert info["distribution"] == "backline-openai"
    assert (info["llms"], info["options"], info["status"]) == (["openai"], ["--base-url"], "loaded")
    help_ = run("console", "--help", env=cli_env())
    assert "--base-url URL" in help_.stdout
