"""The configuration refuses what would quietly undo the confinement (issue 13, item 4):
bypassPermissions, a working directory of ``/`` or the home directory."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from backline_claude_code import ClaudeCodeConfig
from backline_claude_code.config import ENV_SETTING_SOURCES

BACKLINE = shutil.which("backline", path=str(Path(sys.executable).parent)) or "backline"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    (home / "project").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    return home


def test_bypass_permissions_is_refused_from_code_and_from_the_environment(home: Path) -> None:
    with pytest.raises(ValueError, match=r"bypassPermissions is refused.*--allow-bash"):
        ClaudeCodeConfig(cwd=home / "project", permission_mode="bypassPermissions")
    env = {
        "BACKLINE_CLAUDE_CODE_CWD": str(home / "project"),
        "BACKLINE_CLAUDE_CODE_PERMISSION_MODE": "bypassPermissions",
    }
    with pytest.raises(ValueError, match="bypassPermissions is refused"):
        ClaudeCodeConfig.from_env(env)


@pytest.mark.parametrize("where", ["/", "~", "~/.."])
def test_the_root_or_the_home_directory_is_refused(home: Path, where: str) -> None:
    with pytest.raises(ValueError, match=r"your home directory.*Point it at the repository"):
        ClaudeCodeConfig.from_env({"BACKLINE_CLAUDE_CODE_CWD": where})
    assert ClaudeCodeConfig(cwd=home / "project").cwd == (home / "project").resolve()


def test_setting_sources_and_deadlines_come_from_the_environment(home: Path) -> None:
    config = ClaudeCodeConfig.from_env(
        {
            "BACKLINE_CLAUDE_CODE_CWD": str(home / "project"),
            ENV_SETTING_SOURCES: "project, local,project",
            "BACKLINE_CLAUDE_CODE_TURN_TIMEOUT": "600",
            "BACKLINE_CLAUDE_CODE_RETRY_TIMEOUT": "12.5",
        }
    )
    assert config.setting_sources == ("project", "local")
    assert (config.turn_timeout, config.retry_timeout) == (600.0, 12.5)
    default = ClaudeCodeConfig(cwd=home / "project")
    assert default.setting_sources == ()
    assert (default.turn_timeout, default.retry_timeout) == (1800.0, 60.0)
    assert default.warnings == []


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        (ENV_SETTING_SOURCES, "project,everything", "'everything' is not one of user"),
        ("BACKLINE_CLAUDE_CODE_TURN_TIMEOUT", "soon", "must be a number of seconds"),
        ("BACKLINE_CLAUDE_CODE_TURN_TIMEOUT", "0", "positive"),
        ("BACKLINE_CLAUDE_CODE_RETRY_TIMEOUT", "inf", "positive"),
        ("BACKLINE_CLAUDE_CODE_PERMISSION_MODE", "yolo", "not one of default"),
    ],
)
def test_bad_values_say_what_is_wrong(home: Path, name: str, value: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        ClaudeCodeConfig.from_env({"BACKLINE_CLAUDE_CODE_CWD": str(home / "project"), name: value})


def test_what_widens_the_defaults_is_said_loudly(home: Path) -> None:
    config = ClaudeCodeConfig(
        cwd=home / "project", allow_bash=True, setting_sources=("user", "project")
    )
    bash, settings = config.warnings
    assert "any shell command" in bash and "not confined" in bash
    assert "(project)" in settings and "hooks run shell commands" in settings


def _claude_code(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("BACKLINE_CLAUDE_CODE_")}
    return subprocess.run(
        [BACKLINE, "claude-code", "--plain", *args],
        cwd=cwd,
        env={**clean, "ANTHROPIC_API_KEY": "sk-ant-fake", **env},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_command_refuses_bypass_and_a_home_folder_before_starting(home: Path) -> None:
    bypass = _claude_code(
        cwd=home / "project", BACKLINE_CLAUDE_CODE_PERMISSION_MODE="bypassPermissions"
    )
    assert bypass.returncode != 0 and "bypassPermissions is refused" in bypass.stderr
    at_home = _claude_code(cwd=home, HOME=str(home))
    assert at_home.returncode != 0 and "is your home directory" in at_home.stderr
    root = _claude_code("--cwd", "/", cwd=home / "project", HOME=str(home))
    assert root.returncode != 0 and "Claude Code would work in /" in root.stderr


def test_model_flags_follow_the_convention() -> None:
    own = subprocess.run(
        [BACKLINE, "claude-code", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "--claude-model MODEL" in own and "-m, --model MODEL" in own
    assert "The voice LLM's model." in own
    console = subprocess.run(
        [BACKLINE, "console", "--help"], capture_output=True, text=True, check=True
    ).stdout
    for flag in (
        "--claude-model",
        "--claude-setting-sources",
        "--claude-no-claude-md",
        "--claude-turn-timeout",
        "--claude-require-clean",
    ):
        assert flag in console
    assert "--no-claude-md" in own and "--require-clean" in own
