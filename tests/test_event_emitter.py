"""The session's event emitter: registration order, changes made during an emit,
removal, and a raising listener (each listener list is an immutable snapshot)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from backline.voice.events import AgentStateChanged, EventEmitter

EVENT = AgentStateChanged(old="listening", new="thinking")


def test_listeners_run_in_order_and_changes_during_an_emit_apply_to_the_next() -> None:
    em = EventEmitter()
    seen: list[str] = []

    def late(_: Any) -> None:
        seen.append("late")

    def first(_: Any) -> None:
        seen.append("first")
        em.off("agent_state_changed", second)  # still called in this emit
        em.on("agent_state_changed", late)  # called from the next emit on

    def second(_: Any) -> None:
        seen.append("second")

    em.on("agent_state_changed", first)
    em.on("agent_state_changed", second)
    em.emit(EVENT)
    assert seen == ["first", "second"]
    seen.clear()
    em.off("agent_state_changed", first)
    em.emit(EVENT)
    assert seen == ["late"]


def test_off_removes_one_registration_and_the_last_removes_the_name() -> None:
    em = EventEmitter()
    calls: list[int] = []

    def cb(_: Any) -> None:
        calls.append(1)

    em.on("agent_state_changed", cb)
    em.on("agent_state_changed", cb)
    em.off("agent_state_changed", cb)
    em.emit(EVENT)
    assert calls == [1] and em.has_listeners("agent_state_changed")
    em.off("agent_state_changed", cb)
    em.off("agent_state_changed", cb)  # not registered: nothing happens
    assert not em.has_listeners("agent_state_changed")
    em.emit(EVENT)
    assert calls == [1]


def test_a_raising_listener_is_logged_and_the_others_still_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    em = EventEmitter()
    seen: list[str] = []

    def bad(_: Any) -> None:
        raise RuntimeError("boom")

    em.on("agent_state_changed", bad)
    em.on("agent_state_changed", lambda e: seen.append(e.new))
    with caplog.at_level(logging.ERROR, logger="backline"):
        em.emit(EVENT)
    assert seen == ["thinking"]
    assert "listener raised" in caplog.text


def test_an_unknown_event_name_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown event"):
        EventEmitter().on("nope", lambda e: None)  # type: ignore[arg-type]


def test_one_listener_is_kept_without_a_tuple_and_behaves_as_several() -> None:
    em = EventEmitter()
    seen: list[str] = []

    def one(_: Any) -> None:
        seen.append("one")

    def two(_: Any) -> None:
        seen.append("two")

    def bad(_: Any) -> None:
        raise RuntimeError("boom")

    em.on("agent_state_changed", one)
    assert em._listeners["agent_state_changed"] is one  # (no tuple for one listener)
    em.emit(EVENT)
    em.on("agent_state_changed", two)
    em.emit(EVENT)
    em.off("agent_state_changed", one)
    assert em._listeners["agent_state_changed"] is two
    em.emit(EVENT)
    em.off("agent_state_changed", one)  # not there: nothing changes
    em.off("agent_state_changed", two)
    assert not em.has_listeners("agent_state_changed")
    em.emit(EVENT)
    em.on("agent_state_changed", bad)
    em.emit(EVENT)  # a lone listener that raises is logged, not raised
    assert seen == ["one", "one", "two", "two"]
