"""Stored keys: ``backline keys``, the store's file, and every provider's lookup."""

from __future__ import annotations

import json
import logging
import os
import stat
import subprocess
import sys
from pathlib import Path

import click
import pexpect
import pytest

from backline import ChatContext, ChatMessage, get_key
from backline.app import SessionOptions, preflight
from backline.keys import KeyStoreError, delete_key, key_names, keys_path, set_key
from backline.llm.anthropic import AnthropicLLM
from backline.testing.fake_anthropic import FakeAnthropicServer

SECRET = "sk-test-Zq9sTORED"


def backline(*args: str, stdin: str = "", **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "backline", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=60,
        check=False,
    )


# -- the store -----------------------------------------------------------------------


def test_the_store_is_in_the_config_dir_and_private(user_dirs: Path) -> None:
    path = set_key("OPENAI_API_KEY", f"  {SECRET}\n")
    assert path == keys_path() == user_dirs / "config" / "backline" / "keys.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert json.loads(path.read_text()) == {"OPENAI_API_KEY": SECRET}
    set_key("GROQ_API_KEY", "gsk-2")
    set_key("OPENAI_API_KEY", "sk-replaced")
    assert json.loads(path.read_text()) == {
        "GROQ_API_KEY": "gsk-2",
        "OPENAI_API_KEY": "sk-replaced",
    }
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in path.parent.iterdir()] == ["keys.json"]  # no temporary file left
    assert key_names() == ["GROQ_API_KEY", "OPENAI_API_KEY"]
    assert delete_key("GROQ_API_KEY") and not delete_key("GROQ_API_KEY")
    assert key_names() == ["OPENAI_API_KEY"]


def test_the_environment_wins_over_the_stored_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MY_API_KEY", raising=False)
    assert get_key("MY_API_KEY") is None
    set_key("MY_API_KEY", SECRET)
    assert get_key("MY_API_KEY") == SECRET
    monkeypatch.setenv("MY_API_KEY", "from-env")
    assert get_key("MY_API_KEY") == "from-env"
    monkeypatch.setenv("MY_API_KEY", "")  # empty counts as unset
    assert get_key("MY_API_KEY") == SECRET
    assert get_key("MY_API_KEY", {"MY_API_KEY": "given"}) == "given"


@pytest.mark.parametrize(
    ("name", "value", "problem"),
    [
        ("openai key", SECRET, "is not a key name"),
        ("1KEY", SECRET, "is not a key name"),
        ("OPENAI_API_KEY", "  \n", "no key was given"),
        ("OPENAI_API_KEY", "sk a b", "contains whitespace"),
    ],
)
def test_bad_names_and_keys_store_nothing(name: str, value: str, problem: str) -> None:
    set_key("KEPT", "kept")
    before = keys_path().read_text()
    with pytest.raises(KeyStoreError, match=problem):
        set_key(name, value)
    assert keys_path().read_text() == before


def test_a_corrupt_store_is_a_clear_error(caplog: pytest.LogCaptureFixture) -> None:
    keys_path().parent.mkdir(parents=True)
    keys_path().write_text('{"OPENAI_API_KEY": "sk-abc",')
    with pytest.raises(KeyStoreError) as info:
        get_key("OPENAI_API_KEY")
    assert str(keys_path()) in str(info.value) and "not valid JSON" in str(info.value)
    assert "sk-abc" not in str(info.value)
    keys_path().write_text('["sk-abc"]')
    with pytest.raises(KeyStoreError, match="not a JSON object"):
        key_names()


def test_a_store_others_can_read_is_warned_about(caplog: pytest.LogCaptureFixture) -> None:
    path = set_key("OPENAI_API_KEY", SECRET)
    path.chmod(0o644)
    with caplog.at_level(logging.WARNING, logger="backline.keys"):
        assert get_key("OPENAI_API_KEY", {}) == SECRET
    assert f"chmod 600 {path}" in caplog.text
    assert SECRET not in caplog.text


# -- the command -----------------------------------------------------------------------


def test_keys_set_list_path_remove_never_print_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GROQ_API_KEY", raising=False)
    stored = backline("keys", "set", "GROQ_API_KEY", stdin=SECRET + "\n")
    assert stored.returncode == 0, stored.stderr
    assert stored.stdout == f"Stored GROQ_API_KEY in {keys_path()}.\n"
    assert get_key("GROQ_API_KEY") == SECRET
    listed = backline("keys", "list", GROQ_API_KEY="from-env")
    assert listed.stdout == "GROQ_API_KEY  (the environment variable is set and wins)\n"
    assert backline("keys", "path").stdout == f"{keys_path()}\n"
    note = backline("keys", "set", "GROQ_API_KEY", stdin="gsk-new", GROQ_API_KEY="from-env")
    assert "also set in the environment" in note.stdout
    removed = backline("keys", "remove", "GROQ_API_KEY")
    assert removed.stdout == "Removed GROQ_API_KEY.\n"
    gone = backline("keys", "remove", "GROQ_API_KEY")
    assert gone.returncode == 1 and "no stored key named GROQ_API_KEY" in gone.stderr
    empty = backline("keys", "list")
    assert (empty.stdout, empty.returncode) == ("", 0)
    for result in (stored, listed, note, removed):
        assert SECRET not in result.stdout + result.stderr
        assert "gsk-new" not in result.stdout + result.stderr


def test_keys_set_reads_the_key_without_echo() -> None:
    child = pexpect.spawn(
        sys.executable, ["-m", "backline", "keys", "set", "OPENAI_API_KEY"], encoding="utf-8"
    )
    try:
        child.expect(r"Key for OPENAI_API_KEY \(input is hidden\): ", timeout=30)
        child.sendline(SECRET)
        child.expect("Stored OPENAI_API_KEY", timeout=30)
        child.expect(pexpect.EOF, timeout=30)
        assert SECRET not in (child.before or "")
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
    assert get_key("OPENAI_API_KEY", {}) == SECRET


def test_bad_input_to_the_command_is_a_clear_error() -> None:
    bad = backline("keys", "set", "not a name", stdin=SECRET)
    assert bad.returncode == 1 and "is not a key name" in bad.stderr
    empty = backline("keys", "set", "OPENAI_API_KEY", stdin="")
    assert empty.returncode == 1 and "no key was given" in empty.stderr
    keys_path().parent.mkdir(parents=True, exist_ok=True)
    keys_path().write_text("{broken")
    corrupt = backline("keys", "list")
    assert corrupt.returncode == 1 and "not valid JSON" in corrupt.stderr
    assert "Traceback" not in corrupt.stderr


def test_a_lower_case_name_is_stored_in_upper_case_and_said_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    stored = backline("keys", "set", "anthropic_api_key", stdin=SECRET + "\n")
    assert stored.returncode == 0, stored.stderr
    assert stored.stdout == (
        "Note: key names are upper case, the environment variable's name: "
        "anthropic_api_key is stored as ANTHROPIC_API_KEY.\n"
        f"Stored ANTHROPIC_API_KEY in {keys_path()}.\n"
    )
    assert json.loads(keys_path().read_text()) == {"ANTHROPIC_API_KEY": SECRET}
    assert get_key("ANTHROPIC_API_KEY", {}) == SECRET  # the name providers look up
    removed = backline("keys", "remove", "anthropic_api_key")
    assert removed.stdout == "Removed ANTHROPIC_API_KEY.\n"
    assert key_names() == []


def test_a_lower_case_key_stored_before_is_flagged_and_removable() -> None:
    keys_path().parent.mkdir(parents=True, exist_ok=True)
    keys_path().write_text(json.dumps({"anthropic_api_key": SECRET}))
    keys_path().chmod(0o600)
    listed = backline("keys", "list")
    assert listed.stdout == (
        "anthropic_api_key  (never used: providers look up ANTHROPIC_API_KEY; "
        "`backline keys set ANTHROPIC_API_KEY`, then `backline keys remove anthropic_api_key`)\n"
    )
    removed = backline("keys", "remove", "anthropic_api_key")
    assert removed.stdout == "Removed anthropic_api_key.\n"
    assert key_names() == []


def test_set_key_takes_a_name_in_upper_case() -> None:
    set_key("groq_api_key", SECRET)
    assert key_names() == ["GROQ_API_KEY"]
    assert delete_key("groq_api_key") and key_names() == []


# -- providers look keys up the same way --------------------------------------------------


def test_preflight_accepts_a_stored_anthropic_key() -> None:
    with pytest.raises(click.ClickException, match="backline keys set ANTHROPIC_API_KEY"):
        preflight(SessionOptions(), environ={})
    set_key("ANTHROPIC_API_KEY", SECRET)
    preflight(SessionOptions(), environ={})  # no error


async def test_the_anthropic_adapter_sends_the_stored_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    set_key("ANTHROPIC_API_KEY", SECRET)
    with FakeAnthropicServer(["stored", "env"]) as server:
        llm = AnthropicLLM(base_url=server.url)
        async with llm.chat(_hi()) as stream:
            _ = [c async for c in stream]
        await llm.aclose()
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-from-env")
        llm = AnthropicLLM(base_url=server.url)
        async with llm.chat(_hi()) as stream:
            _ = [c async for c in stream]
        await llm.aclose()
        assert [r.api_key for r in server.requests] == [SECRET, "sk-from-env"]


def test_the_claude_code_plugin_uses_a_stored_key(tmp_path: Path) -> None:
    from backline_claude_code import ClaudeCodeConfig, missing_credentials_message

    env = {"HOME": str(tmp_path)}  # no claude login on disk either
    assert missing_credentials_message(env) is not None
    assert "backline keys set ANTHROPIC_API_KEY" in (missing_credentials_message(env) or "")
    set_key("ANTHROPIC_API_KEY", SECRET)
    assert missing_credentials_message(env) is None
    # The CLI subprocess gets the stored key through its environment, the variable wins.
    assert ClaudeCodeConfig.from_env(env, cwd=tmp_path).env == {"ANTHROPIC_API_KEY": SECRET}
    with_var = {**env, "ANTHROPIC_API_KEY": "sk-var"}
    assert ClaudeCodeConfig.from_env(with_var, cwd=tmp_path).env == {}


def _hi() -> ChatContext:
    return ChatContext([ChatMessage(role="user", content="hi")])
