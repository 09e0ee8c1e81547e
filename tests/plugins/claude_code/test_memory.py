"""The repository's CLAUDE.md as the plugin reads it: inside the folder only, cut to a
bound, imports left alone (the end-to-end side is in test_settings_isolation.py)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from backline_claude_code.config import ClaudeCodeConfig
from backline_claude_code.memory import MEMORY_MAX_CHARS, project_memory


def test_no_claude_md_adds_nothing(tmp_path: Path) -> None:
    assert project_memory(tmp_path) == ""


def test_both_files_are_read_with_their_names(tmp_path: Path) -> None:
    (tmp_path / "CLAUDE.md").write_text("Use tabs.\n@docs/style.md\n@~/.ssh/id_rsa\n")
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude" / "CLAUDE.md").write_text("Run the linter.")
    text = project_memory(tmp_path)
    assert text.index("(CLAUDE.md)") < text.index("Use tabs.") < text.index("(.claude/CLAUDE.md)")
    assert "Run the linter." in text
    assert "@~/.ssh/id_rsa" in text  # an import stays a line of text: nothing is read for it


def test_a_symlink_leading_outside_the_folder_is_not_read(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("sk-ant-do-not-leak")
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "CLAUDE.md").symlink_to(secret)
    with caplog.at_level(logging.WARNING, logger="backline.claude_code"):
        assert project_memory(repo) == ""
    assert "leads outside" in caplog.text


def test_a_symlink_inside_the_folder_is_read(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("Shared rules.")
    (tmp_path / "CLAUDE.md").symlink_to(tmp_path / "AGENTS.md")
    assert "Shared rules." in project_memory(tmp_path)


def test_a_huge_file_is_cut_with_a_visible_marker(tmp_path: Path) -> None:
    (tmp_path / "CLAUDE.md").write_text("é" * (MEMORY_MAX_CHARS * 3))
    text = project_memory(tmp_path)
    assert text.count("é") == MEMORY_MAX_CHARS
    assert "[... truncated: the rest of CLAUDE.md is left out (40,000 characters at most)]" in text


def test_a_directory_named_claude_md_is_skipped(tmp_path: Path) -> None:
    (tmp_path / "CLAUDE.md").mkdir()
    assert project_memory(tmp_path) == ""


def test_the_setting_is_read_from_the_environment_and_yields_to_the_cli(tmp_path: Path) -> None:
    env = {"BACKLINE_CLAUDE_CODE_CWD": str(tmp_path)}
    assert ClaudeCodeConfig.from_env(env).reads_claude_md
    off = ClaudeCodeConfig.from_env({**env, "BACKLINE_CLAUDE_CODE_NO_CLAUDE_MD": "1"})
    assert not off.reads_claude_md
    # With the project settings the CLI reads CLAUDE.md itself: the plugin does not.
    assert not ClaudeCodeConfig(cwd=tmp_path, setting_sources=("project",)).reads_claude_md
