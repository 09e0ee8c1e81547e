"""The no-key try-out of ``claude_code``: ``backline try claude_code``.

Both models answer from the fake Anthropic server on 127.0.0.1: the voice agent
(backline's careful scripted one: it passes your words to Claude Code, reads its live
state, relays its updates, and says so when a tool call fails) and Claude Code's own
model (it writes the task into ``notes.md`` in its working folder and tells you). The
real Claude Code CLI runs in between. Found through the ``backline.offline_scripts``
entry point.
"""

from __future__ import annotations

from backline.testing import fake_anthropic as fa
from backline.testing.offline import coding_agent, is_claude_code_cli, voice_agent

HINT = (
    "Say 'ask Claude to ...': Claude Code (the real CLI, a scripted model) writes the task "
    "into notes.md and tells you; 'what is it doing?' reads its live state."
)


def respond(request: fa.AnthropicRequest) -> fa.AnthropicResponse:
    if is_claude_code_cli(request):
        return coding_agent(request)
    return voice_agent(request)
