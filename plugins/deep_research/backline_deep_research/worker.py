"""The background session's life: wait for a question, run a round, keep the outcome's
idle state until the next question (catalog item 174), carry the summary forward."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from . import state as st
from .config import ResearchConfig
from .inbox import CLOSED, Inbox
from .models import LLMSource, ResearchModels
from .research import Closing, Outcome, Previous, ResearchRound, RoundFailed
from .search import SearchProvider, search_provider

if TYPE_CHECKING:
    from backline import BackgroundContext

logger = logging.getLogger("backline.deep_research")

SearchFactory = Callable[[ResearchConfig], SearchProvider]
"""``factory(config) -> SearchProvider``; by default the provider registered under
``config.search``, through the plugin manager."""


def registry_search(config: ResearchConfig) -> SearchProvider:
    """The search provider named by ``config.search``, from the plugin registry."""
    from backline.plugins import PluginManager

    manager = PluginManager.from_environment().load()
    return search_provider(manager, config.search, **config.search_options())


class ResearchWorker:
    """Runs the ``deep_research`` background for one context. ``run()`` is the entrypoint."""

    def __init__(
        self,
        ctx: BackgroundContext,
        config: ResearchConfig,
        *,
        llm: LLMSource | None = None,
        search: SearchFactory | None = None,
    ) -> None:
        self.ctx = ctx
        self.config = config
        self.models = ResearchModels(config, llm)
        self.search_factory = search or registry_search
        self.inbox = Inbox(ctx)
        self.previous: Previous | None = None
        self.outcomes: list[Outcome] = []

    async def run(self) -> None:
        # The idle state is published once here, and after that only by a round's
        # outcome: the loop top never overwrites "done" (catalog item 174).
        self.ctx.set_state(st.waiting())
        async with asyncio.TaskGroup() as tg:
            pump = tg.create_task(self.inbox.pump(), name="deep_research inbox")
            try:
                while (question := await self.inbox.get()) is not CLOSED:
                    if question.strip():
                        await self._round(question)
            finally:
                pump.cancel()

    async def _round(self, question: str) -> None:
        round_ = None
        try:
            search = self.search_factory(self.config)
        except Exception as e:
            await self._failed(
                question, f"the search provider {self.config.search!r} is not usable: {e}"
            )
            return
        try:
            round_ = ResearchRound(
                self.ctx, self.config, self.models, search, self.inbox, question, self.previous
            )
            outcome = await round_.run()
        except Closing:
            return
        except RoundFailed as e:
            await self._failed(question, str(e))
            return
        finally:
            with contextlib.suppress(Exception):
                await search.aclose()
        self.outcomes.append(outcome)
        if outcome.kind == "done":
            self.previous = Previous(outcome.topic, outcome.summary)

    async def _failed(self, question: str, reason: str) -> None:
        from .research import short_topic

        topic = short_topic(question)
        logger.warning("deep research round failed: %s", reason)
        self.ctx.set_state(st.failed(topic, reason))
        await self.ctx.send(
            f"The research on {topic} failed: {reason}. I'm still listening: ask again, "
            "or rephrase the question."
        )
