"""A voice research assistant fronting deep research.

    export ANTHROPIC_API_KEY=sk-ant-...
    python examples/deep_research/research_assistant.py [--search ddgs] [--research-dir DIR]

Equivalent to ``backline console --background deep_research``: you type (or, with
``backline web``, speak) a research question; the research runs in the background
(clarify, plan, search, read, verify, write) and reports back through the
assistant. The report is saved as ``<YYYY-MM-DD>-<slug>.md`` in the chosen folder.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

from backline_deep_research import VOICE_INSTRUCTIONS, ResearchConfig, deep_research_background

from backline import Agent, Session
from backline.io.console import run_console
from backline.llm import LLM


class ResearchAssistant(Agent):
    """Relays between the user and the research (catalog §8B, item 182): forward the
    request with every constraint intact, relay questions one at a time, never state
    findings before they are reported, answer status questions from ``backline_state``."""

    def __init__(self) -> None:
        super().__init__(VOICE_INSTRUCTIONS)


def build_session(
    llm: LLM, config: ResearchConfig, research_llm: LLM | None = None
) -> Session[None]:
    return Session(llm, background=[deep_research_background(config, llm=research_llm)])


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--search", default=None, help="search provider (default ddgs)")
    parser.add_argument("--research-dir", type=Path, default=None, help="where reports go")
    parser.add_argument("--research-model", default=None, help="the research model")
    args = parser.parse_args(argv)
    if not os.environ.get("ANTHROPIC_API_KEY"):
        print("ANTHROPIC_API_KEY is not set: export ANTHROPIC_API_KEY=sk-ant-...", file=sys.stderr)
        return 2
    from backline.llm.anthropic import AnthropicLLM

    try:
        config = ResearchConfig.from_env(
            search=args.search, report_dir=args.research_dir, model=args.research_model
        )
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    await run_console(
        build_session(AnthropicLLM(), config),
        ResearchAssistant(),
        banner=f"Research with {config.search}; reports go to {config.report_dir}. /quit leaves.",
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
