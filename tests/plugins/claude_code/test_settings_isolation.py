"""A repository's own Claude Code settings do not run (issue 13, item 2): its
``.claude/settings.json`` hooks and ``.mcp.json`` servers are shell commands. Its
CLAUDE.md, plain instructions, reaches the model all the same (issue 17)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from backline.testing import fake_anthropic as fa
from tests.plugins.claude_code.conftest import Harness, requires_cli

pytestmark = [requires_cli, pytest.mark.timeout(120)]

HOOKS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "Stop")
RULE = "Name every new file in kebab-case (rule 7f3a)."
NESTED_RULE = "Keep functions short (rule 9c1e)."


def hostile_repository(repo: Path, marks: Path) -> None:
    """Hooks and an MCP server that each leave a marker file when they run."""
    marks.mkdir()

    def touch(name: str) -> list[dict[str, Any]]:
        return [{"hooks": [{"type": "command", "command": f"touch {marks / name}"}]}]

    (repo / ".claude").mkdir()
    settings = {"hooks": {event: touch(event) for event in HOOKS}}
    (repo / ".claude" / "settings.json").write_text(json.dumps(settings))
    (repo / ".claude" / "settings.local.json").write_text(
        json.dumps({"hooks": {"Stop": touch("local-Stop")}})
    )
    server = {"command": "sh", "args": ["-c", f"touch {marks / 'mcp'}"]}
    (repo / ".mcp.json").write_text(json.dumps({"mcpServers": {"repo": server}}))
    (repo / "CLAUDE.md").write_text(f"# House rules\n\n{RULE}\n")
    (repo / ".claude" / "CLAUDE.md").write_text(f"{NESTED_RULE}\n")


def times_sent(request: fa.AnthropicRequest, text: str) -> int:
    """How often ``text`` appears in what the CLI sent (system prompt and messages)."""
    return request.system.count(text) + json.dumps(request.messages).count(text)


def write_a(h: Harness, request: fa.AnthropicRequest) -> Any:
    if request.tool_results:
        return fa.text("Done.")
    return fa.tool_calls(("Write", {"file_path": str(h.cwd / "a.txt"), "content": "a\n"}))


async def run_one_task(h: Harness, marks: Path) -> list[str]:
    hostile_repository(h.cwd, marks)
    await h.session.run(user_input="cc: write a.txt", timeout=60)
    await h.wait_for_state(lambda s: s["last_task"] == "write a.txt", "the task to end")
    assert (h.cwd / "a.txt").read_text() == "a\n"
    return sorted(os.listdir(marks))


async def test_the_repositorys_hooks_and_mcp_servers_do_not_run_by_default(
    harness_factory: Callable[..., Any], tmp_path: Path
) -> None:
    h: Harness = await harness_factory(lambda r: write_a(h, r))
    assert await run_one_task(h, tmp_path / "marks") == []
    first = h.world.coder_requests[0]
    assert not any(t.startswith("mcp__repo") for t in first.tool_names)
    # The plugin read CLAUDE.md (and .claude/CLAUDE.md) into the system prompt.
    assert times_sent(first, RULE) == 1 and RULE in first.system
    assert times_sent(first, NESTED_RULE) == 1


async def test_claude_md_stays_out_when_the_user_says_so(
    harness_factory: Callable[..., Any], tmp_path: Path
) -> None:
    h: Harness = await harness_factory(lambda r: write_a(h, r), read_claude_md=False)
    assert await run_one_task(h, tmp_path / "marks") == []
    assert times_sent(h.world.coder_requests[0], RULE) == 0


async def test_project_settings_load_when_the_user_opts_in(
    harness_factory: Callable[..., Any], tmp_path: Path
) -> None:
    h: Harness = await harness_factory(
        lambda r: write_a(h, r), setting_sources=("project", "local")
    )
    # The hooks run; the repository's MCP servers still do not (only the plugin's own).
    assert await run_one_task(h, tmp_path / "marks") == sorted([*HOOKS, "local-Stop"])
    # The CLI reads CLAUDE.md itself then; the plugin does not add it a second time.
    assert times_sent(h.world.coder_requests[0], RULE) == 1
