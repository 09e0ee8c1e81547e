"""The bridge's own bound on LiveKit's close: ``close_timeout`` (not a field of ``Limits``)."""

from __future__ import annotations

import asyncio

import pytest
from backline_livekit import LiveKitBridge
from backline_livekit.bridge import DEFAULT_CLOSE_TIMEOUT, ENV_CLOSE_TIMEOUT

from backline import Agent, Session
from backline.testing import ScriptedLLM

from .conftest import WAIT, bridged


def bridge(
    monkeypatch: pytest.MonkeyPatch, env: str | None = None, **kwargs: float
) -> LiveKitBridge:
    if env is None:
        monkeypatch.delenv(ENV_CLOSE_TIMEOUT, raising=False)
    else:
        monkeypatch.setenv(ENV_CLOSE_TIMEOUT, env)
    return LiveKitBridge(Session(ScriptedLLM()), **kwargs)


def test_the_close_timeout_defaults_to_ten_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    assert DEFAULT_CLOSE_TIMEOUT == 10.0
    assert bridge(monkeypatch).close_timeout == 10.0


def test_the_argument_or_else_the_variable_sets_it(monkeypatch: pytest.MonkeyPatch) -> None:
    assert bridge(monkeypatch, env="2.5").close_timeout == 2.5
    assert bridge(monkeypatch, env="2.5", close_timeout=4).close_timeout == 4.0


@pytest.mark.parametrize("value", ["0", "-1", "soon", "nan"])
def test_a_bad_variable_is_refused_naming_it(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    with pytest.raises(ValueError, match=f"{ENV_CLOSE_TIMEOUT} must be a positive number"):
        bridge(monkeypatch, env=value)


@pytest.mark.parametrize("value", [0, -1.0, True])
def test_a_bad_argument_is_refused(monkeypatch: pytest.MonkeyPatch, value: float) -> None:
    with pytest.raises(ValueError, match="close_timeout must be a positive number"):
        bridge(monkeypatch, close_timeout=value)


async def test_a_livekit_session_that_does_not_close_is_left_after_the_timeout(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with bridged(ScriptedLLM([]), Agent("Be brief.")) as b:
        real_aclose = b.lk.aclose
        never = asyncio.Event()

        async def stuck() -> None:
            await never.wait()

        b.lk.aclose = stuck  # type: ignore[method-assign]
        b.bridge.close_timeout = 0.05
        await asyncio.wait_for(b.bridge.aclose(), WAIT)  # bounded: it does not wait for LiveKit

        assert b.bridge.closed and b.session.closed
        assert "the LiveKit session did not close within 0.05s" in caplog.text
        b.lk.aclose = real_aclose  # type: ignore[method-assign]
        await real_aclose()
