"""The ``deep_research`` background session definition."""

from __future__ import annotations

from backline import BackgroundContext, BackgroundDefinition, background

from .config import ResearchConfig
from .models import LLMSource
from .prompts import DESCRIPTION, VOICE_INSTRUCTIONS
from .worker import ResearchWorker, SearchFactory

BACKGROUND_ID = "deep_research"


def deep_research_background(
    config: ResearchConfig | None = None,
    *,
    llm: LLMSource | None = None,
    search: SearchFactory | None = None,
) -> BackgroundDefinition:
    """The ``deep_research`` background session.

    ``config`` defaults to the environment (``ResearchConfig.from_env()``), read when
    the session starts. ``llm``: the research models (one ``LLM``, a mapping per
    stage, or ``(stage, model) -> LLM``); default: the plugin registry's LLM named
    by the configuration. ``search(config) -> SearchProvider``; default: the provider
    registered under ``config.search``.
    """

    @background(
        BACKGROUND_ID,
        description=DESCRIPTION,
        voice_instructions=VOICE_INSTRUCTIONS,
    )
    async def deep_research(ctx: BackgroundContext) -> None:
        cfg = config if config is not None else ResearchConfig.from_env()
        await ResearchWorker(ctx, cfg, llm=llm, search=search).run()

    return deep_research
