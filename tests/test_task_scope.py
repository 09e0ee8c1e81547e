"""A TaskScope's failures: news to log, unless its owner awaits its tasks and reads them."""

from __future__ import annotations

import asyncio
import logging

import pytest

from backline.tasks import TaskScope


async def fail() -> None:
    raise ValueError("broken")


async def test_a_failing_task_is_logged_as_an_error(caplog: pytest.LogCaptureFixture) -> None:
    scope = TaskScope("fire and own")
    task = scope.create_task(fail(), name="failing")
    await asyncio.wait([task])
    await scope.aclose()
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert [r.getMessage() for r in errors] == ["task failing of fire and own failed"]


async def test_a_scope_whose_owner_reads_the_outcome_leaves_the_failure_to_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="backline")
    scope = TaskScope("awaited", log_failures=False)
    task = scope.create_task(fail(), name="failing")
    with pytest.raises(ValueError, match="broken"):
        await task
    await scope.aclose()
    assert not [r for r in caplog.records if r.levelno > logging.DEBUG]
    assert "task failing of awaited failed" in caplog.text  # for whoever debugs
