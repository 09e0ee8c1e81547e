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

The leak guard (opt-in): a guarded test fails when a task it created is still
running after it, or when anything reached an event loop's exception handler
while it ran. Turn it on for every test with the ini option ``backline_guard =
true``, for some with the marker ``@pytest.mark.backline_guard``, or by requesting
the ``backline_guard`` fixture (an autouse fixture in a conftest.py can request
it). ``@pytest.mark.backline_guard_off(reason="...")`` exempts a test, and says why.
"""

from __future__ import annotations

import asyncio
import gc
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import TYPE_CHECKING

import pytest

try:  # async fixtures that work in pytest-asyncio's strict mode as well as in auto mode
    from pytest_asyncio import fixture as async_fixture
except ImportError:  # pragma: no cover - pytest-asyncio is not installed
    async_fixture = pytest.fixture  # type: ignore[assignment]

if TYPE_CHECKING:
    from ..plugins import PluginManager
    from ._guard import LoopGuard
    from .clock import VirtualClock
    from .fake_anthropic import FakeAnthropicServer
    from .plugin_kit import BackgroundRun, SessionFactory
    from .scripted_llm import ScriptedLLM


_GUARD_KEY: pytest.StashKey[LoopGuard] = pytest.StashKey()


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


# -- the leak guard ------------------------------------------------------------------

_GUARD_MARKERS = (
    "backline_guard: fail this test if a task it started still runs after it, or if "
    "anything reaches an event loop's exception handler while it runs",
    "backline_guard_off(reason): exempt this test from the backline guard; say why",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "backline_guard",
        type="bool",
        default=False,
        help="backline: guard every test against leftover tasks and loop exception reports",
    )


def pytest_configure(config: pytest.Config) -> None:
    for line in _GUARD_MARKERS:
        config.addinivalue_line("markers", line)


def _is_async_test(item: pytest.Item) -> bool:
    return inspect.iscoroutinefunction(getattr(item, "obj", None))


@pytest.fixture(autouse=True)
def _backline_guard_if_enabled(request: pytest.FixtureRequest) -> None:
    enabled = request.config.getini("backline_guard")
    if enabled or request.node.get_closest_marker("backline_guard") is not None:
        request.getfixturevalue("backline_guard")


@pytest.fixture
def backline_guard(request: pytest.FixtureRequest) -> Iterator[None]:
    """Guard this test: fail it if a task it started still runs after it (and after
    every other fixture's teardown), or if anything reached an event loop's
    exception handler meanwhile."""
    from ._guard import LoopGuard, failure

    off = request.node.get_closest_marker("backline_guard_off")
    if off is not None:
        if not (off.kwargs.get("reason") or off.args):
            pytest.fail("@pytest.mark.backline_guard_off needs a reason", pytrace=False)
        yield
        gc.collect()  # its garbage is reported now, not blamed on a guarded test later
        return
    guard = LoopGuard()
    guard.start()
    if _is_async_test(request.node):
        # The async part runs in the test's loop; it is torn down after this
        # fixture (it was requested from here), and gives the verdict.
        request.node.stash[_GUARD_KEY] = guard
        try:
            request.getfixturevalue("_backline_guard_loop")
        except BaseException:
            guard.finish()  # undo the loop policy wrapper
            raise
        yield
        return
    try:
        yield
    finally:
        verdict = failure([], guard.finish())
    if verdict is not None:
        pytest.fail(verdict, pytrace=False)


@async_fixture
async def _backline_guard_loop(request: pytest.FixtureRequest) -> AsyncIterator[None]:
    from ._guard import failure

    guard = request.node.stash[_GUARD_KEY]
    guard.watch(asyncio.get_running_loop())
    try:
        yield
    finally:
        tasks = await guard.leftover_tasks()
        verdict = failure(tasks, guard.finish())
    if verdict is not None:
        pytest.fail(verdict, pytrace=False)
