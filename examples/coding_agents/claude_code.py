"""A voice coding assistant fronting Claude Code.

    export ANTHROPIC_API_KEY=sk-ant-...
    python examples/coding_agents/claude_code.py [--cwd DIR] [--allow-bash]

Equivalent to ``backline console --background claude_code``: you type (or, with
``backline web``, speak) to the assistant; Claude Code works in the background
in the working directory (default: the current one) and reports back through it.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from backline_claude_code import (
    VOICE_INSTRUCTIONS,
    ClaudeCodeConfig,
    claude_code_background,
    missing_credentials_message,
)

from backline import Agent, Session
from backline.io.console import run_console
from backline.llm import LLM


class CodingAssistant(Agent):
    """Relays between the user and Claude Code (catalog §8A, items 191-195):
    dispatching is not doing; never claim a change before Claude Code announces it;
    forward corrections at once; answer status questions from ``backline_state``."""

    def __init__(self) -> None:
        super().__init__(VOICE_INSTRUCTIONS)


def build_session(llm: LLM, config: ClaudeCodeConfig) -> Session[None]:
    return Session(llm, background=[claude_code_background(config)])


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cwd", type=Path, default=None, help="Claude Code's working directory")
    parser.add_argument("--claude-model", default=None, help="Claude Code's model")
    parser.add_argument("--allow-bash", action="store_true", help="let Claude Code run commands")
    args = parser.parse_args(argv)
    problem = missing_credentials_message()
    if problem:
        print(problem, file=sys.stderr)
        return 2
    from backline.llm.anthropic import AnthropicLLM

    config = ClaudeCodeConfig.from_env(
        cwd=args.cwd, model=args.claude_model, allow_bash=args.allow_bash or None
    )
    session = build_session(AnthropicLLM(), config)
    await run_console(
        session,
        CodingAssistant(),
        banner=f"Talking to Claude Code in {config.cwd}. Type /quit or press Ctrl-D to leave.",
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
