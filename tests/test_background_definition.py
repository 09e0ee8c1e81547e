"""``@background`` definitions: validation, immutability, handling templates, exports
(behaviour catalog §1A–1B, items 1–18, 21–22)."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import typing
from collections.abc import Mapping
from typing import Any

import pytest

import backline
import backline.voice
from backline import (
    UNSET,
    Agent,
    BackgroundContext,
    BackgroundDefinition,
    ChatMessage,
    HandlingOptions,
    Session,
    background,
)
from backline.testing import ScriptedLLM, VirtualClock
from tests.background_kit import forever


def history_texts(session: Session[Any]) -> list[str]:
    return [it.content for it in session.history.items if isinstance(it, ChatMessage)]


async def rendered(
    definition: BackgroundDefinition, *, handling: HandlingOptions | None = None
) -> tuple[str, str]:
    """Send "answer" spoken from ``definition``; return (the inserted text, the reply
    instructions the voice LLM received)."""
    llm = ScriptedLLM(["Noted."])
    session: Session[Any] = Session(llm, background=[definition], handling=handling)
    await session.start(Agent("Help."))
    assert session.background is not None
    await session.background.context(definition.id).send("answer")
    assert await session.wait_for_idle(timeout=10)
    (inserted,) = [
        it for it in session.history.items if isinstance(it, ChatMessage) and it.role == "user"
    ]
    await session.aclose()
    return inserted.content, llm.requests[-1].instructions[-1]


# -- 1A. defining ---------------------------------------------------------------------


def test_decorator_maps_name_to_id_and_keeps_description() -> None:
    defn = background("worker", description="Handles work.")(forever)
    assert isinstance(defn, BackgroundDefinition)
    assert (defn.id, defn.description, defn.entrypoint) == ("worker", "Handles work.", forever)
    assert defn.interrupt_grace == 2.0
    assert defn.handling is None


def test_description_falls_back_to_the_parsed_docstring() -> None:
    @background("docs")
    async def entry(ctx: BackgroundContext) -> None:
        """Refactors code.

        Works on one repository at a time.

        Args:
            ctx: the context (not part of the description).
        """

    assert entry.description == "Refactors code.\n\nWorks on one repository at a time."


def test_explicit_description_beats_the_docstring() -> None:
    @background("docs", description="Explicit.")
    async def entry(ctx: BackgroundContext) -> None:
        """From the docstring."""

    assert entry.description == "Explicit."


def test_an_empty_description_falls_back_but_a_blank_one_is_rejected() -> None:
    @background("docs", description="")
    async def entry(ctx: BackgroundContext) -> None:
        """From the docstring."""

    assert entry.description == "From the docstring."
    with pytest.raises(ValueError, match="background session description must be non-empty"):

        @background("docs", description="   ")
        async def blank(ctx: BackgroundContext) -> None:
            """A docstring that a whitespace description does not fall back to."""


@pytest.mark.parametrize("description", [None, "", "   "])
def test_no_description_and_no_docstring_is_rejected(description: str | None) -> None:
    with pytest.raises(ValueError, match="background session description must be non-empty"):
        background("valid", description=description)(forever)


@pytest.mark.parametrize("name", ["", "   ", None, 3])
def test_the_name_is_checked_before_any_entrypoint_is_given(name: Any) -> None:
    with pytest.raises(ValueError, match="background name must be non-empty"):
        background(name)


@pytest.mark.parametrize("name", ["has space", "a/b", "ünïcode?"])
def test_names_use_a_safe_alphabet(name: str) -> None:
    with pytest.raises(ValueError, match="may use only letters"):
        background(name, description="x")


def test_a_sync_entrypoint_is_rejected_before_its_missing_description() -> None:
    def sync(ctx: BackgroundContext) -> None:
        pass

    with pytest.raises(TypeError, match="async"):
        background("worker")(sync)  # type: ignore[arg-type]


def test_an_object_with_an_async_call_is_an_entrypoint() -> None:
    class Worker:
        """Works as an object."""

        async def __call__(self, ctx: BackgroundContext) -> None:
            pass

    defn = background("obj")(Worker())
    assert defn.id == "obj"


async def _no_context() -> None:
    pass


async def _two_contexts(a: Any, b: Any) -> None:
    pass


async def _varargs(*args: Any) -> None:
    pass


async def _kwonly(*, ctx: Any) -> None:
    pass


async def _default_second(ctx: Any, extra: int = 1) -> None:
    pass


async def _defaulted_only(ctx: Any = None) -> None:
    pass


class _Unreadable:
    __signature__ = "not a signature"

    async def __call__(self, ctx: Any) -> None:
        pass


@pytest.mark.parametrize(
    "entry",
    [
        _no_context,
        _two_contexts,
        _varargs,
        _kwonly,
        _default_second,
        _defaulted_only,
        _Unreadable(),
    ],
)
def test_the_entrypoint_takes_exactly_one_context_argument(entry: Any) -> None:
    with pytest.raises(TypeError, match="exactly one context argument"):
        background("worker", description="x")(entry)


@pytest.mark.parametrize("grace", [-1.0, True, "2", None])
def test_interrupt_grace_must_be_seconds(grace: Any) -> None:
    with pytest.raises(ValueError, match="interrupt_grace"):
        background("worker", description="x", interrupt_grace=grace)(forever)


def test_a_definition_is_immutable() -> None:
    defn = background("worker", description="x")(forever)
    with pytest.raises(dataclasses.FrozenInstanceError):
        defn.id = "other"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        defn.description = "changed"  # type: ignore[misc]


def test_definitions_built_directly_are_validated() -> None:
    with pytest.raises(ValueError, match="background name must be non-empty"):
        BackgroundDefinition(id="", description="x", entrypoint=forever)
    with pytest.raises(TypeError, match="async"):
        BackgroundDefinition(id="w", description="x", entrypoint=print)  # type: ignore[arg-type]


# -- handling templates --------------------------------------------------------------


@pytest.mark.parametrize(
    ("handling", "error", "match"),
    [
        ({"update_templat": "{message}"}, ValueError, "unknown handling option.*update_templat"),
        ({"update_template": "{msg}"}, ValueError, "unknown field.*msg"),
        ({"update_template": "{}"}, ValueError, "unknown field"),
        ({"update_template": "{0}"}, ValueError, "unknown field.*0"),
        ({"reply_at_tail_template": "{message}"}, ValueError, "unknown field.*message"),
        (
            {"reply_maybe_covered_template": "{background_session_description}"},
            ValueError,
            "unknown field.*background_session_description",
        ),
        ({"update_template": 42}, TypeError, "format string or a callable"),
        (["update_template"], TypeError, "must be a mapping"),
    ],
)
def test_bad_handling_is_rejected_not_ignored(
    handling: Any, error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        background("worker", description="x", handling=handling)
    with pytest.raises(error, match=match):
        Session(
            ScriptedLLM(), background=[background("w", description="x")(forever)], handling=handling
        )


def test_handling_is_snapshotted_at_definition_time() -> None:
    options: dict[str, Any] = {"update_template": "original: {message}"}
    defn = background("worker", description="x", handling=options)(forever)  # type: ignore[arg-type]
    options["update_template"] = "mutated: {message}"
    copy = defn.handling
    assert copy is not None and copy is not defn.handling
    copy["update_template"] = "accessor: {message}"
    assert defn.handling == {"update_template": "original: {message}"}


async def test_snapshotted_handling_is_what_renders(virtual_clock: VirtualClock) -> None:
    options: dict[str, Any] = {"update_template": "original: {message}"}
    defn = background("worker", description="x", handling=options)(forever)  # type: ignore[arg-type]
    options["update_template"] = "mutated: {message}"
    got = defn.handling
    assert got is not None
    got["update_template"] = "accessor: {message}"
    inserted, _ = await rendered(defn)
    assert inserted == "original: answer"


async def test_default_templates(virtual_clock: VirtualClock) -> None:
    defn = background("worker", description="Does work.")(forever)
    inserted, instructions = await rendered(defn)
    assert inserted == "Background session `worker` sent an update:\nanswer"
    assert instructions == (
        "New updates arrived from background session `worker`. Tell the user about them "
        "naturally and briefly, without repeating them word for word."
    )


async def test_callable_templates_receive_the_exact_arguments(virtual_clock: VirtualClock) -> None:
    seen: list[tuple[str, dict[str, Any]]] = []

    def update(args: Mapping[str, Any]) -> str:
        seen.append(("update", dict(args)))
        return f"U[{args['message']}]"

    def at_tail(args: Mapping[str, Any]) -> str:
        seen.append(("tail", dict(args)))
        return "T:" + ",".join(args["message_ids"])

    defn = background(
        "worker",
        description="Does work.",
        handling={"update_template": update, "reply_at_tail_template": at_tail},
    )(forever)
    inserted, instructions = await rendered(defn)
    assert inserted == "U[answer]"
    assert [kind for kind, _ in seen] == ["update", "tail"]
    assert seen[0][1] == {
        "background_session_id": "worker",
        "background_session_description": "Does work.",
        "message": "answer",
    }
    tail_args = seen[1][1]
    assert set(tail_args) == {"background_session_id", "message_ids"}
    assert tail_args["background_session_id"] == "worker"
    (message_id,) = tail_args["message_ids"]
    assert message_id.startswith("background_message_")
    assert instructions == f"T:{message_id}"


async def test_format_templates_get_named_fields(virtual_clock: VirtualClock) -> None:
    defn = background(
        "worker",
        description="Does work.",
        handling={
            "update_template": (
                "[{background_session_id}|{background_session_description}] {message}"
            ),
            "reply_at_tail_template": "tail {background_session_id} {message_ids}",
        },
    )(forever)
    inserted, instructions = await rendered(defn)
    assert inserted == "[worker|Does work.] answer"
    assert instructions.startswith("tail worker ['background_message_")


async def test_definition_handling_replaces_the_session_handling_wholesale(
    virtual_clock: VirtualClock,
) -> None:
    defn = background(
        "worker", description="x", handling={"update_template": "decorator: {message}"}
    )(forever)
    session_handling: HandlingOptions = {
        "update_template": "session: {message}",
        "reply_at_tail_template": "session tail",
    }
    inserted, instructions = await rendered(defn, handling=session_handling)
    assert inserted == "decorator: answer"
    assert instructions.startswith("New updates arrived from background session `worker`.")


async def test_empty_definition_handling_still_counts_as_present(
    virtual_clock: VirtualClock,
) -> None:
    defn = background("worker", description="x", handling={})(forever)
    inserted, instructions = await rendered(
        defn, handling={"update_template": "session: {message}", "reply_at_tail_template": "s"}
    )
    assert inserted == "Background session `worker` sent an update:\nanswer"
    assert instructions.startswith("New updates arrived")


async def test_session_handling_applies_and_is_copied_at_construction(
    virtual_clock: VirtualClock,
) -> None:
    defn = background("worker", description="x")(forever)
    options: dict[str, Any] = {
        "update_template": "session: {message}",
        "reply_at_tail_template": "session tail for {background_session_id}",
    }
    llm = ScriptedLLM(["ok"])
    session: Session[Any] = Session(llm, background=[defn], handling=options)  # type: ignore[arg-type]
    options["update_template"] = "mutated: {message}"
    await session.start(Agent("Help."))
    assert session.background is not None
    await session.background.context("worker").send("answer")
    assert await session.wait_for_idle(timeout=10)
    assert "session: answer" in history_texts(session)
    assert llm.requests[-1].instructions[-1] == "session tail for worker"
    await session.aclose()


async def test_a_template_error_propagates_before_anything_is_inserted(
    virtual_clock: VirtualClock,
) -> None:
    def broken(args: Mapping[str, Any]) -> str:
        raise KeyError("boom")

    def not_text(args: Mapping[str, Any]) -> Any:
        return 42

    defn = background("worker", description="x", handling={"update_template": broken})(forever)
    other = background("other", description="x", handling={"update_template": not_text})(forever)
    session: Session[Any] = Session(ScriptedLLM(), background=[defn, other])
    events: list[Any] = []
    session.on("background_message", events.append)
    await session.start(Agent("Help."))
    assert session.background is not None
    with pytest.raises(KeyError, match="boom"):
        await session.background.context("worker").send("answer")
    with pytest.raises(TypeError, match="must return a string"):
        await session.background.context("other").send("answer", silent=True)
    assert history_texts(session) == []
    assert len(session.current_agent.chat_ctx) == 1  # only the instructions
    assert events == []
    assert session.agent_state == "listening"
    await session.aclose()


# -- 1B. session-level validation -----------------------------------------------------


def test_the_session_rechecks_definitions() -> None:
    with pytest.raises(TypeError, match="BackgroundDefinition"):
        Session(ScriptedLLM(), background=[forever])  # type: ignore[list-item]
    defn = background("worker", description="x")(forever)
    object.__setattr__(defn, "id", "")  # bypass the frozen dataclass and its checks
    with pytest.raises(ValueError, match="background name must be non-empty"):
        Session(ScriptedLLM(), background=[defn])
    blank = background("blank", description="x")(forever)
    object.__setattr__(blank, "description", " ")
    with pytest.raises(ValueError, match="description must be non-empty"):
        Session(ScriptedLLM(), background=[blank])


def test_duplicate_ids_are_listed_sorted() -> None:
    a = background("a", description="x")(forever)
    b = background("b", description="x")(forever)
    c = background("c", description="x")(forever)
    with pytest.raises(ValueError, match=r"duplicate background session id.*: a, b$"):
        Session(ScriptedLLM(), background=[b, a, c, a, b])


def test_public_exports() -> None:
    names = {
        "background",
        "BackgroundDefinition",
        "BackgroundContext",
        "UNSET",
        "HandlingOptions",
        "ReplyPromptArgs",
        "UpdatePromptArgs",
        "BackgroundMessage",
        "BackgroundReply",
        "BackgroundState",
        "BackgroundStatus",
    }
    assert names <= set(backline.__all__)
    for name in names:
        assert hasattr(backline, name), name
    events = {"BackgroundMessage", "BackgroundReply", "BackgroundState", "BackgroundStatus"}
    assert events <= set(backline.voice.__all__)
    in_union = {cls.__name__ for cls in typing.get_args(backline.voice.Event)}
    assert events <= in_union
    assert {"background_message", "background_reply", "background_state"} <= set(
        typing.get_args(backline.voice.EventName)
    )
    # ``backline.background`` is the decorator (it shadows the subpackage attribute).
    package = importlib.import_module("backline.background")
    assert names - events <= set(package.__all__)
    assert {"backline_send", "backline_state", "backline_stop"} <= package.RESERVED_TOOL_NAMES
    assert repr(UNSET) == "UNSET" and not UNSET and UNSET is not None


async def test_the_context_exposes_id_description_and_session(virtual_clock: VirtualClock) -> None:
    seen: list[tuple[str, str, Any]] = []

    @background("worker", description="Does work.")
    async def entry(ctx: BackgroundContext) -> None:
        seen.append((ctx.id, ctx.description, ctx.session))
        await asyncio.Event().wait()

    session: Session[Any] = Session(ScriptedLLM(), background=[entry])
    await session.start(Agent("Help."))
    assert seen == [("worker", "Does work.", session)]
    assert session.background is not None
    ctx = session.background.context("worker")
    assert ctx.session is session and ctx.state is UNSET and not ctx.closed
    assert repr(ctx) == "BackgroundContext('worker')"
    with pytest.raises(KeyError, match="nope"):
        session.background.context("nope")
    await session.aclose()
    assert ctx.closed
