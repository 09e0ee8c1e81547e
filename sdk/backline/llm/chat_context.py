"""The chat context: an ordered, de-duplicated list of conversation items."""

from __future__ import annotations

import bisect
import itertools
import operator
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar, Literal, TypeAlias, TypeVar, cast

Role: TypeAlias = Literal["system", "developer", "user", "assistant"]

_counter = itertools.count(1)
_prefix = os.urandom(4).hex()


def new_id(prefix: str) -> str:
    """A process-unique id such as ``item_3f2a9c01_17`` (cheap: no uuid per item)."""
    return f"{prefix}{_prefix}_{next(_counter)}"


def _item_id() -> str:
    return f"item_{_prefix}_{next(_counter)}"  # new_id("item_"), one call less per item


_now = time.time  # (the factory of created_at: no frame of its own per item)

_T = TypeVar("_T")


def _made_at_first_read(cls: type, name: str, make: Callable[[], Any], doc: str) -> Any:
    """Make the slot ``name`` of ``cls`` a property that makes its value at the first
    read (``make()``) and keeps it; returns the slot's own reader (``None``: not made)."""
    slot = cls.__dict__[name]  # the slot's descriptor, kept by the property
    read, write = slot.__get__, slot.__set__

    def get(self: Any) -> Any:
        value = read(self)
        if value is None:
            value = make()
            write(self, value)
        return value

    setattr(cls, name, property(get, write, doc=doc))
    return read


def _lazy_fields(cls: type[_T]) -> type[_T]:
    """Give an item class an ``extra`` and an ``id`` made at their first read, not per
    item (a history holds thousands of items).

    Most items never carry data of their own (an empty dict is 64 bytes), and most are
    never asked for their id (a string of about 68 bytes: a history is appended to,
    and ``ChatContext`` indexes ids only once one is looked up). Each stays a field
    (the constructor's ``extra=`` and ``id=``, ``dataclasses.fields``, ``replace``,
    ``asdict``, ``repr``); its slot holds ``None`` until the first read, which stores
    what it returns: ``item.extra["k"] = 1`` persists, and an id (unique in the
    process, as ever) never changes once seen. ``_extra_or_none`` and ``_id_or_none``
    read the slots without making anything (one C call; inherited by subclasses).
    """
    item_class: Any = cls
    item_class._extra_or_none = staticmethod(
        _made_at_first_read(cls, "extra", dict, "Your own data on this item (a dict).")
    )
    item_class._id_or_none = staticmethod(
        _made_at_first_read(cls, "id", _item_id, "The item's id (unique in the process).")
    )
    return cls


def _read_id(item: ChatItem) -> str | None:
    """An item's id without making one (``None`` if nobody has read it yet)."""
    return type(item)._id_or_none(item)


def _read_extra(item: ChatItem) -> dict[str, Any] | None:
    """An item's ``extra`` without making one (``None`` if it was never read or set)."""
    return type(item)._extra_or_none(item)


_NOTHING: Mapping[str, Any] = MappingProxyType({})


def peek_extra(item: ChatItem) -> Mapping[str, Any]:
    """``item.extra`` to read only, without making it: the item's dict, or an empty
    mapping when it has none yet (for code that looks at every item: a read of
    ``extra`` makes the dict it returns)."""
    extra = type(item)._extra_or_none(item)  # (``_read_extra``, inlined: every item)
    return _NOTHING if extra is None else extra


# The fields' defaults: no dict until ``extra`` is read, no id until ``id`` is
# (``_lazy_fields``).
# An item's ``type`` is its class's (a class attribute, not a field: no slot per item).
_NO_EXTRA: dict[str, Any] = cast("dict[str, Any]", None)
_NO_ID: str = cast("str", None)


@_lazy_fields
@dataclass(eq=False, kw_only=True, slots=True)
class ChatMessage:
    """A message from the user, the assistant, or the system."""

    role: Role
    content: str
    extra: dict[str, Any] = _NO_EXTRA
    interrupted: bool = False
    id: str = _NO_ID
    created_at: float = field(default_factory=_now)
    type: ClassVar[Literal["message"]] = "message"
    _id_or_none: ClassVar[Callable[[Any], str | None]]  # (set by _lazy_fields)
    _extra_or_none: ClassVar[Callable[[Any], dict[str, Any] | None]]

    @property
    def text_content(self) -> str:
        return self.content


@_lazy_fields
@dataclass(eq=False, kw_only=True, slots=True)
class FunctionCall:
    """A tool call the model made. ``arguments`` is the raw JSON text."""

    call_id: str
    name: str
    arguments: str
    extra: dict[str, Any] = _NO_EXTRA
    id: str = _NO_ID
    created_at: float = field(default_factory=_now)
    type: ClassVar[Literal["function_call"]] = "function_call"
    _id_or_none: ClassVar[Callable[[Any], str | None]]  # (set by _lazy_fields)
    _extra_or_none: ClassVar[Callable[[Any], dict[str, Any] | None]]


@_lazy_fields
@dataclass(eq=False, kw_only=True, slots=True)
class FunctionCallOutput:
    """The result of a tool call, as text the model reads."""

    call_id: str
    name: str
    output: str
    is_error: bool = False
    extra: dict[str, Any] = _NO_EXTRA
    id: str = _NO_ID
    created_at: float = field(default_factory=_now)
    type: ClassVar[Literal["function_call_output"]] = "function_call_output"
    _id_or_none: ClassVar[Callable[[Any], str | None]]  # (set by _lazy_fields)
    _extra_or_none: ClassVar[Callable[[Any], dict[str, Any] | None]]


@_lazy_fields
@dataclass(eq=False, kw_only=True, slots=True)
class AgentHandoff:
    """A marker in the history: the conversation moved from one agent to another.

    Model adapters skip it; it is there for transcripts and tests.
    """

    old_agent: str | None
    new_agent: str
    extra: dict[str, Any] = _NO_EXTRA
    id: str = _NO_ID
    created_at: float = field(default_factory=_now)
    type: ClassVar[Literal["agent_handoff"]] = "agent_handoff"
    _id_or_none: ClassVar[Callable[[Any], str | None]]  # (set by _lazy_fields)
    _extra_or_none: ClassVar[Callable[[Any], dict[str, Any] | None]]


ChatItem: TypeAlias = ChatMessage | FunctionCall | FunctionCallOutput | AgentHandoff
_ITEM_TYPES = (ChatMessage, FunctionCall, FunctionCallOutput, AgentHandoff)  # built once


def _created_at(item: ChatItem) -> float:
    return item.created_at


_get_id = operator.attrgetter("id")
_get_created_at = operator.attrgetter("created_at")


def _in_order(items: list[ChatItem]) -> bool:
    """Whether ``created_at`` never decreases along ``items``."""
    stamps = list(map(_get_created_at, items))
    return all(map(operator.le, stamps, itertools.islice(stamps, 1, None)))


class ChatContext:
    """Conversation items ordered by ``created_at``, each id at most once.

    ``insert`` places items by ``created_at`` (after any item with the same
    timestamp) and skips an id already present, so re-inserting is harmless.
    Treat a context you did not create as read-only: agents expose theirs and
    take changes through ``Agent.update_chat_ctx``.
    """

    # The index by id is complete up to the items added while nobody had read their
    # id (a new item, the usual case): those are in this context only as themselves
    # (found by identity among the items of their timestamp), and are indexed, their
    # ids made, from ``_unindexed_from`` on when an id is first looked up.
    __slots__ = ("_by_id", "_items", "_unindexed_from")

    def __init__(self, items: Iterable[ChatItem] = ()) -> None:
        self._items: list[ChatItem] = []
        self._by_id: dict[str, ChatItem] = {}
        self._unindexed_from: int | None = None
        self.insert(items)

    @classmethod
    def empty(cls) -> ChatContext:
        return cls()

    @property
    def items(self) -> Sequence[ChatItem]:
        """The items in order. Do not mutate the returned list."""
        return self._items

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[ChatItem]:
        return iter(self._items)

    def __contains__(self, item_id: object) -> bool:
        if self._unindexed_from is not None:
            self._index()
        return item_id in self._by_id

    def __repr__(self) -> str:
        return f"ChatContext({len(self._items)} items)"

    def get(self, item_id: str) -> ChatItem | None:
        """The item with this id, or ``None``."""
        if self._unindexed_from is not None:
            self._index()
        return self._by_id.get(item_id)

    def index_by_id(self, item_id: str) -> int | None:
        item = self.get(item_id)
        if item is None:
            return None
        # Items with equal timestamps sit together; scan from the leftmost.
        start = bisect.bisect_left(self._items, item.created_at, key=_created_at)
        for i in range(start, len(self._items)):
            if self._items[i] is item:
                return i
        return None  # pragma: no cover - the index and the list agree by construction

    def insert(self, items: ChatItem | Iterable[ChatItem]) -> list[ChatItem]:
        """Insert items by ``created_at``; returns those actually added (new ids)."""
        if isinstance(items, _ITEM_TYPES):
            items = (items,)
        elif not self._items:
            # Filling an empty context (a context built from another's items, as
            # update_chat_ctx does on every insert): items already in order with
            # distinct ids, always so when they come from a context, are taken in
            # one pass at C speed; the result is what the loop below would build.
            batch = list(items)
            by_id = dict(zip(map(_get_id, batch), batch, strict=True))
            if len(by_id) == len(batch) and _in_order(batch):
                self._items = batch
                self._by_id = by_id
                self._unindexed_from = None
                return batch.copy()
            items = batch
        add = self._add
        return [item for item in items if add(item)]

    def _index(self) -> None:
        """Index the items added while their ids were unread (making their ids)."""
        start, self._unindexed_from = self._unindexed_from, None
        by_id = self._by_id
        for item in itertools.islice(self._items, start, None):
            item_id = item.id
            if item_id not in by_id:
                by_id[item_id] = item

    def _add(self, item: ChatItem) -> bool:
        """Insert one item by ``created_at``; False if its id is there already."""
        lst = self._items
        if type(item)._id_or_none(item) is None:  # (``_read_id``, inlined: the hot path)
            # Nobody has read its id: it is in no index, and in this context only as
            # this very object, among the items of its timestamp. No id is made.
            stamp = item.created_at
            if not lst or lst[-1].created_at < stamp:
                at = len(lst)
                lst.append(item)
            else:
                at = bisect.bisect_right(lst, stamp, key=_created_at)
                for i in range(bisect.bisect_left(lst, stamp, key=_created_at), at):
                    if lst[i] is item:
                        return False
                lst.insert(at, item)
            start = self._unindexed_from
            if start is None or at < start:
                self._unindexed_from = at
            return True
        if self._unindexed_from is not None:
            self._index()
        by_id = self._by_id
        item_id = item.id
        if item_id in by_id:
            return False
        if not lst or lst[-1].created_at <= item.created_at:
            lst.append(item)
        else:
            lst.insert(bisect.bisect_right(lst, item.created_at, key=_created_at), item)
        by_id[item_id] = item
        return True

    def add_message(
        self,
        *,
        role: Role,
        content: str,
        interrupted: bool = False,
        extra: dict[str, Any] | None = None,
        created_at: float | None = None,
    ) -> ChatMessage:
        """Create a message, insert it and return it."""
        msg = ChatMessage(
            role=role,
            content=content,
            interrupted=interrupted,
            extra=dict(extra) if extra else _NO_EXTRA,
            created_at=_now() if created_at is None else created_at,
        )
        self.insert(msg)
        return msg

    def remove(self, item_ids: Iterable[str]) -> None:
        """Remove items by id; unknown ids are ignored."""
        if self._unindexed_from is not None:
            self._index()
        ids = {i for i in item_ids if i in self._by_id}
        if not ids:
            return
        self._items = [it for it in self._items if it.id not in ids]
        for i in ids:
            del self._by_id[i]

    def copy(
        self,
        *,
        exclude_function_calls: bool = False,
        exclude_instructions: bool = False,
        exclude_handoffs: bool = False,
    ) -> ChatContext:
        """A shallow copy (items are shared), optionally filtered."""
        new = ChatContext.__new__(ChatContext)
        if not (exclude_function_calls or exclude_instructions or exclude_handoffs):
            # The common case (a copy per request or per edit): copying the id index
            # as a dict is several times cheaper than rebuilding it item by item.
            new._items = self._items.copy()
            new._by_id = self._by_id.copy()
            new._unindexed_from = self._unindexed_from
            return new
        items: list[ChatItem] = self._items
        if exclude_function_calls or exclude_instructions or exclude_handoffs:
            items = [
                it
                for it in items
                if not (
                    (
                        exclude_function_calls
                        and it.type in ("function_call", "function_call_output")
                    )
                    or (
                        exclude_instructions
                        and it.type == "message"
                        and it.role in ("system", "developer")
                    )
                    or (exclude_handoffs and it.type == "agent_handoff")
                )
            ]
        new._items = list(items)
        new._by_id = {it.id: it for it in new._items}
        new._unindexed_from = None
        return new

    def truncate(self, *, max_items: int) -> None:
        """Keep the last ``max_items`` items (and any leading system messages)."""
        if len(self._items) <= max_items:
            return
        head = [it for it in self._items if it.type == "message" and it.role == "system"]
        tail = [it for it in self._items[-max_items:] if it not in head]
        self._items = head + tail
        self._by_id = {it.id: it for it in self._items}
        self._unindexed_from = None

    def to_dicts(self) -> list[dict[str, Any]]:
        """The items as plain dicts (for transcripts and front ends)."""
        return [item_to_dict(it) for it in self._items]


def item_to_dict(item: ChatItem) -> dict[str, Any]:
    """A JSON-compatible dict of one item."""
    base: dict[str, Any] = {"id": item.id, "type": item.type, "created_at": item.created_at}
    if isinstance(item, ChatMessage):
        base.update(role=item.role, content=item.content, interrupted=item.interrupted)
    elif isinstance(item, FunctionCall):
        base.update(call_id=item.call_id, name=item.name, arguments=item.arguments)
    elif isinstance(item, FunctionCallOutput):
        base.update(
            call_id=item.call_id, name=item.name, output=item.output, is_error=item.is_error
        )
    else:
        base.update(old_agent=item.old_agent, new_agent=item.new_agent)
    extra = _read_extra(item)
    if extra:
        base["extra"] = dict(extra)
    return base
