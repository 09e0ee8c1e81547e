"""pytest fixtures for backline (registered through the ``pytest11`` entry point).

- ``scripted_llm``: an empty ``ScriptedLLM``; ``push()`` responses onto it.
- ``fake_anthropic``: a running ``FakeAnthropicServer`` on 127.0.0.1.
- ``virtual_clock``: the test's event loop on virtual time.

For plugin authors:

- ``make_session``: ``await make_session(*backgrounds, llm=None, tools=(), agent=None)``
  returns a started ``Session`` (a ``ScriptedLLM`` unless ``llm`` is given), closed
  after the test.
- ``plugin_manager``: a ``PluginManager`` with the built-in plugins and no installed
  ones, strict (a plugin that fails raises), observing sessions during the test:
  ``plugin_manager.register(my_plugin_module)``; it is all undone after the test.
- ``drive_background``: ``backline.testing.drive_background``, to run a background
  definition against a scripted voice agent (see ``BackgroundDriver``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import TYPE_CHECKING

import pytest

try:  # async fixtures that work in pytest-asyncio's strict mode as well as in auto mode
    from pytest_asyncio import fixture as async_fixture
except ImportError:  # pragma: no cover - pytest-asyncio is not installed
    async_fixture = pytest.fixture  # type: ignore[assignment]

if TYPE_CHECKING:
    from ..plugins import PluginManager
    from .clock import VirtualClock
    from .fake_anthropic import FakeAnthropicServer
    from .plugin_kit import BackgroundRun, SessionFactory
    from .scripted_llm import ScriptedLLM


@pytest.fixture
def scripted_llm() -> ScriptedLLM:
    from .scripted_llm import ScriptedLLM

    return ScriptedLLM()


@pytest.fixture
def fake_anthropic() -> Iterator[FakeAnthropicServer]:
    from .fake_anthropic import FakeAnthropicServer

    with FakeAnthropicServer() as server:
        yield server


@async_fixture
async def virtual_clock() -> AsyncIterator[VirtualClock]:
    from .clock import virtual_clock as _virtual_clock

    with _virtual_clock() as clock:
        yield clock


@async_fixture
async def make_session() -> AsyncIterator[SessionFactory]:
    from .plugin_kit import SessionFactory

    factory = SessionFactory()
    try:
        yield factory
    finally:
        await factory.aclose()


@pytest.fixture
def plugin_manager() -> Iterator[PluginManager]:
    from ..plugins import PluginManager

    manager = PluginManager(entry_points=False, strict=True).load()
    manager.activate()
    try:
        yield manager
    finally:
        manager.deactivate()
        for info in manager.plugins():
            manager.unregister(info.name)


@pytest.fixture
def drive_background() -> Callable[..., Awaitable[BackgroundRun]]:
    from .plugin_kit import drive_background as drive

    return drive
