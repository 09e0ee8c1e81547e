"""A turn's facts, noted on the event loop and made into records on the writer thread.

The recorder notes each fact as its maker followed by its fields (what the loop already
has in hand, nothing formatted) in one flat list per turn: no object is kept per fact
(objects that outlive a turn cost the garbage collector on the loop). It hands the log
one ``Facts`` per turn; the writer thread calls ``records()``, which reads the items,
cuts long texts to the log's limit and builds each statement's parameters. Fields are
plain values taken when the fact happened, or an item of the history (not changed once
there) with its id made on the loop, so what the writer reads does not change under it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..limits import truncate_text
from ..llm.chat_context import peek_extra
from ..llm.llm import Usage
from ..voice._metrics import tokens_per_second
from . import _schema
from ._store import Record

Maker = Callable[..., Record | None]
"""``maker(sid, limit, *fields)`` is a fact's record (or None: nothing to keep); a maker
takes a fixed number of fields, so the flat list reads back without separators."""


def turn(
    sid: str,
    limit: int,
    at: float,
    who: str,
    agent: str | None,
    text: str,
    interrupted: int,
    item_id: str,
) -> Record:
    if len(text) > limit:
        text = truncate_text(text, limit, "a turn")[0]
    return _schema.INSERT_TURN, (sid, at, who, agent, text, interrupted, item_id)


def tool_call(sid: str, limit: int, at: float, call_id: str, name: str, arguments: str) -> Record:
    if len(arguments) > limit:
        arguments = truncate_text(arguments, limit, "tool arguments")[0]
    return _schema.INSERT_TOOL_CALL, (sid, at, call_id, name, arguments)


def tool_output(
    sid: str, limit: int, at: float, call_id: str, name: str, output: str, is_error: int
) -> Record:
    if len(output) > limit:
        output = truncate_text(output, limit, "a tool output")[0]
    return _schema.INSERT_TOOL_OUTPUT, (sid, at, call_id, name, output, is_error)


def agent_state(sid: str, limit: int, at: float, old: str, new: str) -> Record:
    """The agent's state changed (three per turn: the shortest fact)."""
    return _schema.INSERT_STATE, (sid, at, "agent", None, old, new, None)


def request(
    sid: str,
    limit: int,
    at: float,
    speech_id: str,
    llm: str,
    model: str | None,
    started: float,
    first: float | None,
    ended: float,
    usage: Usage | None,
    status: str,
) -> Record:
    """One model request ended (the ``llm_metrics`` event's figures, by its rules)."""
    return _schema.INSERT_LLM_REQUEST, (
        sid,
        at,
        speech_id,
        llm,
        model,
        None if first is None else first - started,
        ended - started,
        None if usage is None else usage.input_tokens,
        None if usage is None else usage.output_tokens,
        tokens_per_second(usage, first, ended),
        status,
    )


def item(sid: str, limit: int, it: Any, item_id: str, agent: str | None) -> Record | None:
    """An item entered the history: its record (None: not one the log keeps). Read
    here, on the writer thread: an item is not changed once in the history, and its
    id was made on the loop."""
    kind = it.type
    if kind == "message":
        role = it.role
        if role == "user":
            if "background_id" in peek_extra(it):
                return None  # a background's message: its own table has it
            return turn(sid, limit, it.created_at, "user", None, it.content, 0, item_id)
        if role == "assistant":
            at, text, cut = it.created_at, it.content, int(it.interrupted)
            return turn(sid, limit, at, "agent", agent, text, cut, item_id)
        return None  # instructions
    if kind == "function_call":
        return tool_call(sid, limit, it.created_at, it.call_id, it.name, it.arguments)
    if kind == "function_call_output":
        at, call_id, name = it.created_at, it.call_id, it.name
        return tool_output(sid, limit, at, call_id, name, it.output, int(it.is_error))
    old, new = it.old_agent, it.new_agent  # (the only other item: a handoff)
    return _schema.INSERT_STATE, (sid, it.created_at, "handoff", None, old, new, None)


def made(sid: str, limit: int, record: Record) -> Record:
    """A record made on the loop already (the rare events'; the session row's)."""
    return record


_FIELDS: dict[Maker, int] = {
    maker: maker.__code__.co_argcount - 2 for maker in (item, agent_state, request, made)
}


class Facts:
    """One turn's facts for one session row (see the module doc)."""

    __slots__ = ("facts", "limit", "sid")

    def __init__(self, sid: str, limit: int, facts: list[Any]) -> None:
        self.sid = sid
        self.limit = limit
        self.facts = facts  # maker, its fields, maker, its fields, ...

    def __len__(self) -> int:
        """How many records (read through the list: only when some are dropped)."""
        facts, count, i = self.facts, 0, 0
        while i < len(facts):
            count += 1
            i += 1 + _FIELDS[facts[i]]
        return count

    def records(self) -> list[Record]:
        sid, limit, facts = self.sid, self.limit, self.facts
        out: list[Record] = []
        i, end = 0, len(facts)
        while i < end:
            maker = facts[i]
            nxt = i + 1 + _FIELDS[maker]
            record = maker(sid, limit, *facts[i + 1 : nxt])
            if record is not None:
                out.append(record)
            i = nxt
        return out
