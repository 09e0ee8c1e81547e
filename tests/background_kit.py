"""Shared helpers for the background-session tests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from backline import (
    Agent,
    BackgroundContext,
    ChatContext,
    ChatMessage,
    Session,
    background,
    function_tool,
)
from backline.testing import VirtualClock


@pytest.fixture
async def close_sessions(
    virtual_clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[None]:
    """Close every session a test made, even when it fails (bounded, on virtual time)."""
    made: list[Session[Any]] = []
    init = Session.__init__

    def tracking_init(self: Session[Any], *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(Session, "__init__", tracking_init)
    yield
    for session in made:
        await session.aclose()


async def forever(ctx: BackgroundContext) -> None:
    await asyncio.Event().wait()


worker = background("worker", description="Does work.")(forever)


def ctx_of(session: Session[Any], background_id: str = "worker") -> BackgroundContext:
    assert session.background is not None
    return session.background.context(background_id)


def deliver(session: Session[Any], content: str, background_id: str = "worker") -> None:
    """What ``backline_send`` does once it has checked the id."""
    assert session.background is not None
    session.background.deliver(background_id, content)


def user_messages(ctx: ChatContext) -> list[ChatMessage]:
    return [it for it in ctx.items if isinstance(it, ChatMessage) and it.role == "user"]


class Second(Agent):
    def __init__(self) -> None:
        super().__init__("Second.")


class First(Agent):
    """Hands off to ``Second`` when the model calls ``transfer``."""

    def __init__(self) -> None:
        super().__init__("First.")

    @function_tool
    async def transfer(self) -> Agent:
        """Transfer."""
        return Second()
