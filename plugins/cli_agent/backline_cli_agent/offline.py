"""The no-key try-out of ``cli_agent``: ``backline try cli_agent``.

The agent CLI is Claude Code (``claude -p``: on your PATH, else the one bundled with
``claude-agent-sdk`` when it is installed), and both models answer from the fake
Anthropic server on 127.0.0.1: the voice agent (backline's careful scripted one) and
the agent's (it tells you it got the task, through backline's MCP voice channel).
Without a Claude Code CLI no agent is started: the background waits for one you
connect (``backline mcp config``). Found through the ``backline.offline_scripts``
entry point.
"""

from __future__ import annotations

import importlib.util
import shlex
import shutil
from pathlib import Path

from backline.testing import fake_anthropic as fa
from backline.testing.offline import coding_agent, is_claude_code_cli, voice_agent

from .config import ENV_AGENT_CMD


def _claude() -> str | None:
    found = shutil.which("claude")
    if found is not None:
        return found
    spec = importlib.util.find_spec("claude_agent_sdk")
    if spec is None or spec.origin is None:
        return None
    bundled = Path(spec.origin).parent / "_bundled" / "claude"
    return str(bundled) if bundled.is_file() else None


_CLI = _claude()
ENVIRONMENT = {ENV_AGENT_CMD: f"{shlex.quote(_CLI)} -p"} if _CLI else {}
HINT = (
    "Say 'ask the agent to ...': the agent CLI (Claude Code with a scripted model) gets "
    "the task and answers through the voice channel."
    if _CLI
    else "No Claude Code CLI was found: the background waits for an agent you connect "
    "(`backline mcp config --background cli_agent`)."
)


def respond(request: fa.AnthropicRequest) -> fa.AnthropicResponse:
    if is_claude_code_cli(request):
        return coding_agent(request, notes=None)  # it may not write: it only answers
    return voice_agent(request, names={"cli_agent": "the agent"})
