from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from backline import Session
from backline.voice.events import EVENT_NAMES


class Recorder:
    """Records session events by name, in order."""

    def __init__(self, session: Session[Any]) -> None:
        self.events: list[Any] = []
        for name in sorted(EVENT_NAMES):  # every event, in emission order
            session.on(name, self.events.append)  # type: ignore[arg-type]

    def of(self, kind: str) -> list[Any]:
        return [e for e in self.events if e.type == kind]

    @property
    def agent_states(self) -> list[str]:
        return [e.new for e in self.of("agent_state_changed")]

    @property
    def user_states(self) -> list[str]:
        return [e.new for e in self.of("user_state_changed")]


@pytest.fixture(autouse=True, scope="session")
def private_runtime_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Front ends started by tests announce their MCP endpoint here, never in the
    user's runtime directory (``backline.mcp``)."""
    saved = os.environ.get("BACKLINE_RUNTIME_DIR")
    os.environ["BACKLINE_RUNTIME_DIR"] = str(tmp_path_factory.mktemp("backline-runtime"))
    yield
    if saved is None:
        os.environ.pop("BACKLINE_RUNTIME_DIR", None)
    else:
        os.environ["BACKLINE_RUNTIME_DIR"] = saved


@pytest.fixture
async def no_leaked_tasks() -> Callable[[], Any]:
    """Call the returned coroutine function at the end of a test: it fails if tasks
    other than those present at the start are still alive."""
    before = set(asyncio.all_tasks())

    async def check() -> None:
        for _ in range(5):
            await asyncio.sleep(0)
        alive = {t for t in asyncio.all_tasks() if t not in before and not t.done()}
        alive.discard(asyncio.current_task())  # type: ignore[arg-type]
        assert not alive, f"tasks left behind: {[t.get_name() for t in alive]}"

    return check


from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile(
    "default",
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "long",
    max_examples=2000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("default")

from tests.background_kit import close_sessions  # noqa: E402, F401 - a shared fixture
