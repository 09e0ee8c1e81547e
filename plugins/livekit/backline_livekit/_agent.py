"""The LiveKit side of the bridge: an ``Agent`` whose ``llm_node`` is backline.

LiveKit asks its agent's ``llm_node`` for a reply to every user turn it
recognises (and to ``AgentSession.run(user_input=...)``). Here that node hands
the user's words to the backline session and speaks the first words backline
produces; LiveKit's own LLM, tools and instructions are never used. The same
pattern as ``livekit-plugins-langchain``: another engine behind the node.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, Callable
from typing import Any

from livekit.agents import NOT_GIVEN, APIConnectOptions, NotGivenOr, llm
from livekit.agents import Agent as LKAgent
from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS
from livekit.agents.voice import ModelSettings
from livekit.agents.voice import SpeechHandle as LKSpeechHandle

from ._output import Segment


class NoLLM(llm.LLM[Any]):
    """Stands in for LiveKit's LLM: LiveKit only asks for replies when its agent has
    one. backline answers through the agent's ``llm_node``; this is never called."""

    @property
    def model(self) -> str:
        return "backline"

    @property
    def provider(self) -> str:
        return "backline"

    def chat(
        self,
        *,
        chat_ctx: llm.ChatContext,
        tools: list[llm.Tool] | None = None,
        conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS,
        parallel_tool_calls: NotGivenOr[bool] = NOT_GIVEN,
        tool_choice: NotGivenOr[llm.ToolChoice] = NOT_GIVEN,
        extra_kwargs: NotGivenOr[dict[str, Any]] = NOT_GIVEN,
    ) -> llm.LLMStream:
        raise RuntimeError("backline answers through the agent's llm_node; NoLLM is never called")


class TurnSlot:
    """A LiveKit reply waiting for backline's next segment (or for backline to settle)."""

    def __init__(self, handle: LKSpeechHandle) -> None:
        self.handle = handle
        """The LiveKit reply that speaks the segment."""
        self._result: asyncio.Future[Segment | None] = asyncio.get_running_loop().create_future()

    @property
    def open(self) -> bool:
        return not self._result.done()

    def give(self, segment: Segment | None) -> None:
        if not self._result.done():
            self._result.set_result(segment)

    async def wait(self) -> Segment | None:
        return await self._result


class BacklineAgent(LKAgent):
    """The one LiveKit agent of a bridged session (backline switches its own agents).

    ``user_turn(text)`` gives the turn to backline and returns the slot the
    reply's first segment will fill; ``None`` when there is nothing to answer.
    """

    def __init__(self, user_turn: Callable[[str], TurnSlot | None]) -> None:
        super().__init__(instructions="(backline answers; these instructions are not used)")
        self._user_turn = user_turn
        self._seen: set[str] = set()

    def _new_user_text(self, chat_ctx: llm.ChatContext) -> str | None:
        """The user's new words: the last user message LiveKit has not handed over yet."""
        for item in reversed(chat_ctx.items):
            if item.type == "message" and item.role == "user":
                if item.id in self._seen:
                    return None
                self._seen.add(item.id)
                return item.text_content or None
        return None

    async def llm_node(
        self,
        chat_ctx: llm.ChatContext,
        tools: list[llm.Tool],
        model_settings: ModelSettings,
    ) -> AsyncIterable[str]:
        text = self._new_user_text(chat_ctx)
        slot = self._user_turn(text) if text else None
        if slot is None:
            return
        try:
            segment = await slot.wait()
            if segment is None:
                return  # backline settled without a word for this reply
            async for delta in segment.texts():
                yield delta
        finally:
            slot.give(None)  # cancelled (LiveKit interrupted the reply): later words use say()
