from __future__ import annotations

import asyncio
import contextlib
import gc
import os
from collections.abc import Callable, Iterator
from pathlib import Path
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


# Exemptions from the guard, each with its reason. Delete an entry once its cause is
# fixed on main.
GUARD_EXEMPT: dict[str, str] = {}  # test file -> why its tests are not guarded


@contextlib.contextmanager
def cyclic_garbage() -> Iterator[list[str]]:
    """The type names of the objects the block leaves in reference cycles: the
    collector runs before, is off during the block, and keeps what it finds after."""
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    found: list[str] = []
    try:
        yield found
        gc.collect()
        found.extend(type(o).__name__ for o in gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was_enabled:
            gc.enable()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    long_run = config.getoption("hypothesis_profile", None) == "long"
    for item in items:
        reason = GUARD_EXEMPT.get(item.nodeid.split("::")[0])
        if reason is not None:
            item.add_marker(pytest.mark.backline_guard_off(reason=reason))
        if long_run and getattr(getattr(item, "obj", None), "is_hypothesis_test", False):
            item.add_marker(pytest.mark.timeout(0))  # a long run takes what it takes


@pytest.fixture(autouse=True)
def _guard(backline_guard: None) -> None:
    """Every test of the suite is guarded (backline's pytest plugin): it fails if a
    task it started still runs after it, or if anything reached an event loop's
    exception handler while it ran. Exempt a test only with
    ``@pytest.mark.backline_guard_off(reason="...")``."""


@pytest.fixture(autouse=True)
def user_dirs(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own config and data directories (stored keys, the conversation
    log): no test reads or writes the real home's. Subprocesses inherit them. The
    conversation log is off (``BACKLINE_LOG=0``) unless a test turns it on."""
    root = tmp_path_factory.mktemp("home")
    for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        monkeypatch.setenv(name, str(root / name.split("_")[1].lower()))
    monkeypatch.setenv("BACKLINE_LOG", "0")
    return root


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


def _examples(default: int) -> int:
    """``BACKLINE_HYPOTHESIS_EXAMPLES`` overrides a profile's example count."""
    raw = os.environ.get("BACKLINE_HYPOTHESIS_EXAMPLES", "").strip()
    if not raw:
        return default
    if not raw.isdigit() or int(raw) < 1:
        raise pytest.UsageError(
            f"BACKLINE_HYPOTHESIS_EXAMPLES must be a positive whole number, got {raw!r}"
        )
    return int(raw)


# default: CI's bounded run. long: thousands of examples, and pytest-timeout's
# per-test limit off for the property tests (see pytest_collection_modifyitems).
settings.register_profile(
    "default",
    max_examples=_examples(500),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "long",
    max_examples=_examples(2000),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("default")

from tests.background_kit import close_sessions  # noqa: E402, F401 - a shared fixture
