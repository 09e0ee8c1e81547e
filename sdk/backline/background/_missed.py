"""What the user missed: the record, the catch-up on return, and ``backline_missed``.

``MissedUpdates`` is a session part. It watches the conversation and keeps, in
order, what the user did not hear:

- while the user is away (the user-away timer marked them ``away``): every spoken
  update of a background (``send``), whether the agent voiced it to an empty room,
  has not voiced it yet, or was cut off; and every alert (a background finished,
  failed or asked something: ``background_alert``);
- while the user is there: a spoken update whose reply was interrupted before it
  was heard (or never spoken: the reply said nothing).

An update voiced to the end while the user is there was heard: it leaves the
record. When the user comes back (their state leaves ``away``) and the record
holds something new, the voice agent offers a short catch-up: a note in its
context, voiced like a background's update (when the conversation is idle, never
over the user, coalesced, tools off). The generated tool ``backline_missed``
answers "what did I miss?" from the record, oldest first, each item saying whether
it was heard, and clears it once told.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from ..llm.chat_context import ChatMessage, new_id
from ..llm.tools import FunctionTool
from ..tasks import TaskScope
from ..voice.parts import PartHost, Pending, Replies, ReplyStatus, SchedulerClosed
from ._alerts import alert_text
from .tools import MISSED_TOOL

__all__ = [
    "MISSED_TOOL",
    "MissedItem",
    "MissedRecord",
    "MissedTool",
    "MissedUpdates",
]

logger = logging.getLogger("backline")

MAX_ITEMS = 40
"""The record keeps the newest this many items (and counts those it left out)."""
ITEM_CHARS = 300
"""An item's text is cut to this many characters."""
MAX_TRACKED = 64
"""Spoken updates followed until their reply ends (while the user is there)."""
SAID_CHARS = 80
"""Of a relay cut off, the end of what it got to say (before the cut) is kept."""
NOTE_ITEMS = 6
"""The catch-up note names this many items, then counts the rest."""

MissedKind: TypeAlias = Literal["update", "finished", "failed", "question"]

MISSED_DESCRIPTION = (
    "Tell the user what they missed: what each background session said, finished, "
    "failed or asked while they were away, and the updates they did not hear (cut off "
    "before they were heard), oldest first. Use it when the user asks what they missed "
    "or accepts a catch-up. The record is cleared once told."
)
NOTHING_MISSED = (
    "Nothing was missed: no background session reported anything while the user was "
    "away, and every update was heard."
)
CATCH_UP_AT_TAIL = (
    "The user has just come back. Offer a short catch-up: in one or two sentences, say "
    "which background sessions have news (what finished, failed or asks something), "
    "then offer the details. Do not read everything out."
)
CATCH_UP_MAYBE_COVERED = (
    "The user has come back, and you may already have told them what they missed. "
    "If you have, say nothing; otherwise offer a short catch-up in one sentence and "
    "offer the details."
)
CATCH_UP_TOLD = (
    "The user has already been told what they missed: do not repeat it. Say nothing "
    "unless something is left unanswered."
)


@dataclass(slots=True)
class MissedItem:
    """One thing the user missed. ``kind``: a spoken ``update`` (``send``), or an alert
    (``finished``, ``failed``, ``question``); ``away``: it came, or was spoken, while
    the user was away; ``heard``: for an update, whether its reply played to the end
    (``why`` says why not: ``'interrupted after "..."'`` with the end of what the agent
    got to say, ``"interrupted before any of it was said"``, ``"never spoken"``, ``"not
    spoken yet"``);
    ``None`` for an alert."""

    seq: int
    background_id: str
    kind: MissedKind
    text: str
    away: bool
    heard: bool | None = None
    why: str | None = None
    message_id: str | None = field(default=None, repr=False)

    def line(self) -> str:
        """How the item reads in the tool's answer."""
        # An alert's text names its background already ("ci finished: ...").
        head = f"{self.background_id} said: {self.text}" if self.kind == "update" else self.text
        if self.heard is False:
            return f"{head} (NOT HEARD: {self.why or 'interrupted'})"
        if self.away:
            return f"{head} ({'spoken ' if self.heard else ''}while the user was away)"
        return head


def _said(speech: Any) -> str:
    """What a relay that was cut off got to say (the history keeps what was heard)."""
    if speech is None:
        return ""
    items = speech.chat_items
    text = " ".join(str(i.content) for i in items if getattr(i, "role", None) == "assistant")
    text = " ".join(text.split())
    return text if len(text) <= SAID_CHARS else "…" + text[-(SAID_CHARS - 1) :]


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= ITEM_CHARS else text[: ITEM_CHARS - 1] + "…"


class MissedRecord:
    """What the user missed, in order (bounded: the newest ``MAX_ITEMS``)."""

    def __init__(self, max_items: int = MAX_ITEMS) -> None:
        self.max_items = max_items
        self._items: list[MissedItem] = []
        self.left_out = 0  # items dropped to stay within the bound

    def __len__(self) -> int:
        return len(self._items)

    @property
    def items(self) -> list[MissedItem]:
        """A copy of the items, oldest first."""
        return list(self._items)

    def add(self, item: MissedItem) -> MissedItem:
        keys = [i.seq for i in self._items]
        self._items.insert(bisect.bisect(keys, item.seq), item)
        while len(self._items) > self.max_items:
            self._items.pop(0)
            self.left_out += 1
        return item

    def find(self, message_id: str) -> MissedItem | None:
        return next((i for i in self._items if i.message_id == message_id), None)

    def remove(self, item: MissedItem) -> None:
        if item in self._items:
            self._items.remove(item)

    def clear(self) -> None:
        self._items = []
        self.left_out = 0

    def render(self) -> str:
        """The answer of ``backline_missed``: every item, oldest first."""
        if not self._items:
            return NOTHING_MISSED
        count = len(self._items)
        lines = [f"What the user missed ({count} item{'s' if count != 1 else ''}, oldest first):"]
        if self.left_out:
            lines.append(f"({self.left_out} older items were left out.)")
        lines += [f"{n}. {item.line()}" for n, item in enumerate(self._items, 1)]
        return "\n".join(lines)

    def summary(self, after: int = -1) -> str:
        """The catch-up note's list: the items after ``after`` (a seq), briefly."""
        items = [i for i in self._items if i.seq > after and i.why != "not spoken yet"]
        named = [
            i.text if i.kind != "update" else f"{i.background_id} sent an update"
            for i in items[:NOTE_ITEMS]
        ]
        more = len(items) - len(named)
        return "; ".join(named) + (f"; and {more} more" if more > 0 else "")


async def _missed(part: MissedUpdates, args: dict[str, Any], _ctx: Any) -> str:
    return part.tell()


_MISSED_TEMPLATE = FunctionTool(
    _missed,
    name=MISSED_TOOL,
    description=MISSED_DESCRIPTION,
    parameters={"type": "object", "properties": {}, "additionalProperties": False},
    raw=True,
)


class MissedTool:
    """The part that gives every agent ``backline_missed`` (a reserved name), answered
    by its ``MissedUpdates``. A part of its own, listed after the background sessions'
    (their tools come first), while ``MissedUpdates`` listens from before they start."""

    def __init__(self, missed: MissedUpdates) -> None:
        self._tools = [_MISSED_TEMPLATE.__get__(missed)]

    @property
    def tools(self) -> Sequence[FunctionTool]:
        return self._tools

    def reserved_names(self) -> Mapping[str, str]:
        return {MISSED_TOOL: "background sessions"}

    async def start(self, session: PartHost, taken: Collection[str] = ()) -> None:
        if MISSED_TOOL in taken:
            raise ValueError(f"duplicate function name: {MISSED_TOOL} is already in use")

    def stop(self) -> Sequence[TaskScope]:
        return ()

    def finish(self) -> None:
        return None


class MissedUpdates:
    """The record of what the user missed and the catch-up (a session part; see the
    module doc); ``tool`` is the part that answers ``backline_missed`` from it."""

    tools: Sequence[FunctionTool] = ()

    def __init__(self, *, max_items: int = MAX_ITEMS) -> None:
        self.record = MissedRecord(max_items)
        self.tool = MissedTool(self)
        self._session: PartHost | None = None
        self._scheduler: Replies | None = None
        self._scope = TaskScope("catch-up")
        self._seq = 0
        self._away = False
        self._away_since = 0.0
        self._offered = -1  # the newest item a catch-up offered
        self._told = False  # the user was told (the tool) since the last offer
        self._tracked: dict[str, MissedItem] = {}  # message id -> update (user there)
        self._relays: dict[str, Any] = {}  # speech id -> a relay's handle, until it ends

    def reserved_names(self) -> Mapping[str, str]:
        return {}

    @property
    def away(self) -> bool:
        """Whether the user is away now."""
        return self._away

    # -- the session part --------------------------------------------------------------------
    async def start(self, session: PartHost, taken: Collection[str] = ()) -> None:
        self._session = session
        self._scope = TaskScope("catch-up")
        self._away = False
        self._tracked = {}
        self._relays = {}
        self._scheduler = session.reply_scheduler(self, name="catch-up", source="background_reply")
        for name, callback in self._listeners():
            session.on(name, callback)

    def stop(self) -> Sequence[TaskScope]:
        session, self._session = self._session, None
        if session is not None:
            for name, callback in self._listeners():
                session.off(name, callback)
        self._scope.cancel()
        return (self._scope,)

    def finish(self) -> None:
        return None

    def _listeners(self) -> list[tuple[str, Any]]:
        return [
            ("user_state_changed", self._on_user),
            ("background_message", self._on_message),
            ("speech_created", self._on_speech),
            ("background_reply", self._on_reply),
            ("background_alert", self._on_alert),
        ]

    # -- the tool ----------------------------------------------------------------------------
    def tell(self) -> str:
        """What the user missed (the tool's answer); the record is cleared."""
        text = self.record.render()
        self.record.clear()
        self._told = True
        return text

    # -- what happens ------------------------------------------------------------------------
    def _next(self) -> int:
        self._seq += 1
        return self._seq

    def _on_user(self, ev: Any) -> None:
        if ev.new == "away":
            self._away = True
            self._away_since = asyncio.get_running_loop().time()
        elif ev.old == "away":
            self._away = False
            self._came_back()

    def _on_message(self, ev: Any) -> None:
        if ev.silent:
            return
        item = MissedItem(
            seq=self._next(),
            background_id=ev.background_id,
            kind="update",
            text=_cut(ev.content),
            away=self._away,
            heard=False,
            why="not spoken yet",
            message_id=ev.message_id,
        )
        if self._away:
            self.record.add(item)
        else:
            self._tracked[ev.message_id] = item  # missed only if its reply is not heard
            while len(self._tracked) > MAX_TRACKED:
                del self._tracked[next(iter(self._tracked))]

    def _on_speech(self, ev: Any) -> None:
        if ev.source == "background_reply":  # a relay: what it got to say, if cut off
            self._relays[ev.speech.id] = ev.speech
            while len(self._relays) > MAX_TRACKED:
                del self._relays[next(iter(self._relays))]

    def _on_reply(self, ev: Any) -> None:
        status: ReplyStatus = ev.status
        if status == "scheduled":
            return
        relay = self._relays.pop(ev.speech_id, None) if ev.speech_id else None
        why = "never spoken"
        if status == "interrupted":
            said = _said(relay)
            why = f'interrupted after "{said}"' if said else "interrupted before any of it was said"
        for message_id in ev.message_ids:
            item = self._tracked.pop(message_id, None) or self.record.find(message_id)
            if item is None:
                continue
            if status == "completed":
                if not self._away:  # played to the end, the user there: heard
                    self.record.remove(item)
                    continue
                item.away, item.heard, item.why = True, True, None
            else:
                item.heard, item.why = False, why
            if self.record.find(message_id) is None:
                self.record.add(item)

    def _on_alert(self, ev: Any) -> None:
        if ev.kind == "question" and self._asked(ev.background_id, ev.text):
            return
        if self._away:
            self.record.add(
                MissedItem(
                    seq=self._next(),
                    background_id=ev.background_id,
                    kind=ev.kind,
                    text=_cut(ev.text),
                    away=True,
                )
            )

    def _asked(self, background_id: str, text: str) -> bool:
        """A question's alert: the update that asked it (``ctx.ask`` sends the question
        first) becomes the question, keeping whether it was heard. False: none found."""
        for item in [*reversed(self._tracked.values()), *reversed(self.record.items)]:
            if item.background_id != background_id or item.kind != "update":
                continue
            if alert_text(background_id, "question", item.text) == text:
                item.kind, item.text = "question", _cut(text)
                return True
        return False

    # -- the catch-up ------------------------------------------------------------------------
    def _came_back(self) -> None:
        items = [i for i in self.record.items if i.seq > self._offered]
        if not items or self._session is None or self._scheduler is None:
            return
        summary = self.record.summary(self._offered)
        if not summary:
            return
        self._offered = items[-1].seq
        self._told = False
        minutes = (asyncio.get_running_loop().time() - self._away_since) / 60
        away = f" after about {round(minutes)} minutes away" if minutes >= 1 else ""
        note = (
            f"The user is back{away}. What they missed: {summary}. "
            f"The {MISSED_TOOL} tool tells it all, in order."
        )
        self._scope.create_task(self._offer(note), name="catch-up offer")

    async def _offer(self, note: str) -> None:
        scheduler = self._scheduler
        if scheduler is None:
            return
        message_id = new_id("catch_up_")
        item = ChatMessage(role="user", content=note, extra={"backline_catch_up": message_id})
        with contextlib.suppress(SchedulerClosed):
            await scheduler.enqueue([item], [message_id], owner=None)

    # -- ReplyOwner (the catch-up's reply) ---------------------------------------------------
    def render_reply(self, batch: list[Pending], at_tail: bool) -> str:
        if self._told:
            return CATCH_UP_TOLD
        return CATCH_UP_AT_TAIL if at_tail else CATCH_UP_MAYBE_COVERED

    def reply_status(self, ids: list[str], status: ReplyStatus, speech_id: str | None) -> None:
        if speech_id is not None and status != "scheduled":
            self._relays.pop(speech_id, None)  # (the catch-up's own reply)
        logger.debug("catch-up %s: %s", ids, status)
