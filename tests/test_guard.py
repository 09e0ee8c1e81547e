"""The leak guard of backline's pytest plugin, as a plugin author uses it: opt-in,
by ini option, marker or fixture, with exemptions that must say why (issue 12)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

TESTS = """
import asyncio
import pytest


async def test_leaks_a_task():
    asyncio.get_running_loop().create_task(asyncio.sleep(100), name="leaky-sleeper")


async def test_lets_an_exception_go_unretrieved():
    async def boom():
        raise ValueError("boom-never-retrieved")

    asyncio.get_running_loop().create_task(boom())
    await asyncio.sleep(0.01)


def test_closes_its_own_loop_with_a_task_pending():
    loop = asyncio.new_event_loop()
    loop.create_task(asyncio.sleep(10), name="destroyed-pending")
    loop.run_until_complete(asyncio.sleep(0))
    loop.close()


async def test_cleans_up():
    task = asyncio.get_running_loop().create_task(asyncio.sleep(100))
    task.cancel()
    await asyncio.sleep(0)


@pytest.fixture
async def owned_task():
    task = asyncio.get_running_loop().create_task(asyncio.sleep(100))
    yield
    task.cancel()  # a fixture torn down before the guard looks: not a leak


async def test_a_fixture_owns_the_task(owned_task):
    await asyncio.sleep(0)


@pytest.mark.backline_guard_off(reason="shows an exemption")
async def test_exempt_with_a_reason():
    asyncio.get_running_loop().create_task(asyncio.sleep(100))


@pytest.mark.backline_guard_off
async def test_exempt_without_a_reason():
    pass
"""


def run(tmp_path: Path, ini: str, tests: str = TESTS) -> dict[str, str]:
    """Run pytest on ``tests`` in a fresh project; the outcome of each test."""
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n" + ini
    )
    (tmp_path / "test_project.py").write_text(textwrap.dedent(tests))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", "test_project.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    outcomes: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        for word in ("PASSED", "FAILED", "ERROR"):
            if line.startswith(word + " ") and "::" in line:
                name = line.split("::", 1)[1].split(" ")[0]
                # A test that passed and then failed the guard at teardown: ERROR wins.
                if outcomes.get(name) != "ERROR":
                    outcomes[name] = word
    outcomes["_output"] = proc.stdout
    return outcomes


def test_the_ini_option_guards_every_test(tmp_path: Path) -> None:
    out = run(tmp_path, "backline_guard = true\n")
    text = out["_output"]
    assert out["test_leaks_a_task"] == "ERROR", text
    assert "leaky-sleeper" in text and "still run after it" in text
    assert out["test_lets_an_exception_go_unretrieved"] == "ERROR"
    assert "boom-never-retrieved" in text
    assert out["test_closes_its_own_loop_with_a_task_pending"] == "ERROR"
    assert "Task was destroyed but it is pending" in text
    assert out["test_cleans_up"] == "PASSED"
    assert out["test_a_fixture_owns_the_task"] == "PASSED"
    assert out["test_exempt_with_a_reason"] == "PASSED"
    assert out["test_exempt_without_a_reason"] == "ERROR"
    assert "backline_guard_off needs a reason" in text


def test_the_marker_or_the_fixture_guards_one_test_and_nothing_else(tmp_path: Path) -> None:
    tests = """
    import asyncio
    import pytest


    @pytest.mark.backline_guard
    async def test_marked():
        asyncio.get_running_loop().create_task(asyncio.sleep(100))


    async def test_with_fixture(backline_guard):
        asyncio.get_running_loop().create_task(asyncio.sleep(100))


    async def test_unguarded():
        asyncio.get_running_loop().create_task(asyncio.sleep(100))


    def test_unguarded_sync():
        loop = asyncio.new_event_loop()
        loop.create_task(asyncio.sleep(10))
        loop.run_until_complete(asyncio.sleep(0))
        loop.close()
    """
    out = run(tmp_path, "", tests)
    assert out["test_marked"] == "ERROR", out["_output"]
    assert out["test_with_fixture"] == "ERROR"
    assert out["test_unguarded"] == "PASSED"  # opt-in: nothing else is guarded
    assert out["test_unguarded_sync"] == "PASSED"
