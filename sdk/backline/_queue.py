"""``BoundedQueue``: the one bounded FIFO between a producer that must never block and a
consumer that may be slow (a web page, a network peer).

``put`` never waits: past a bound (a count of items, and optionally a total cost such
as bytes) it raises ``QueueFull`` and adds nothing, so the producer decides what
falling behind means (drop the consumer, drop the item, report it). A ``key`` makes
items coalesce: a put with a key already queued replaces that item (the latest
wins) and moves it to the end, so a chatty source of snapshots (a state, a
progress figure) holds one slot, however fast it reports.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")


class QueueFull(Exception):
    """Adding an item would pass a bound of a ``BoundedQueue`` (nothing was added)."""


class BoundedQueue(Generic[T]):
    """A FIFO for one event loop with at most ``max_items`` items and, with ``cost``,
    at most ``max_cost`` total cost (``cost(item)``, e.g. its size in bytes).

    ``put(item)`` appends or raises ``QueueFull``; ``put(item, key=k)`` replaces a
    queued item with key ``k`` (moving it to the end). ``await get()`` takes the
    oldest item; ``get_nowait()``, ``clear()``, ``len()`` and ``cost`` as expected.
    """

    def __init__(
        self,
        *,
        max_items: int,
        max_cost: int | None = None,
        cost: Callable[[T], int] | None = None,
    ) -> None:
        if max_items < 1 or (max_cost is not None and max_cost < 1):
            raise ValueError("BoundedQueue bounds must be positive")
        if (max_cost is None) != (cost is None):
            raise ValueError("give max_cost and cost together")
        self.max_items = max_items
        self.max_cost = max_cost
        self._cost_of = cost
        self._items: collections.OrderedDict[int, tuple[T, Hashable | None, int]] = (
            collections.OrderedDict()
        )
        self._by_key: dict[Hashable, int] = {}
        self._seq = itertools.count()
        self._cost = 0
        self._getters: collections.deque[asyncio.Future[None]] = collections.deque()

    def __len__(self) -> int:
        return len(self._items)

    @property
    def cost(self) -> int:
        """The total cost of the queued items (0 without a ``cost`` function)."""
        return self._cost

    def empty(self) -> bool:
        return not self._items

    def put(self, item: T, *, key: Hashable | None = None) -> None:
        """Append ``item`` (replacing the queued item with the same ``key``, if any).

        Raises ``QueueFull`` (saying which bound) and changes nothing if the queue
        would then hold more than ``max_items`` items or more than ``max_cost``.
        """
        cost = self._cost_of(item) if self._cost_of is not None else 0
        replaced = self._by_key.get(key) if key is not None else None
        old_cost = self._items[replaced][2] if replaced is not None else 0
        count = len(self._items) + (0 if replaced is not None else 1)
        if count > self.max_items:
            raise QueueFull(f"more than {self.max_items} items waiting")
        total = self._cost - old_cost + cost
        if self.max_cost is not None and total > self.max_cost:
            raise QueueFull(f"more than {self.max_cost} waiting (cost of the items)")
        if replaced is not None:
            del self._items[replaced]
        seq = next(self._seq)
        self._items[seq] = (item, key, cost)
        if key is not None:
            self._by_key[key] = seq
        self._cost = total
        self._wake_next()

    def get_nowait(self) -> T:
        """The oldest item; raises ``asyncio.QueueEmpty`` if there is none."""
        if not self._items:
            raise asyncio.QueueEmpty
        _, (item, key, cost) = self._items.popitem(last=False)
        if key is not None:
            del self._by_key[key]
        self._cost -= cost
        return item

    async def get(self) -> T:
        """The oldest item, waiting for one (cancellable at any point)."""
        while not self._items:
            getter = asyncio.get_running_loop().create_future()
            self._getters.append(getter)
            try:
                await getter
            except BaseException:
                getter.cancel()
                with contextlib.suppress(ValueError):
                    self._getters.remove(getter)
                if self._items and not getter.cancelled():
                    self._wake_next()  # the wake-up this getter took passes on
                raise
        return self.get_nowait()

    def clear(self) -> None:
        """Drop every queued item."""
        self._items.clear()
        self._by_key.clear()
        self._cost = 0

    def _wake_next(self) -> None:
        while self._getters:
            getter = self._getters.popleft()
            if not getter.done():
                getter.set_result(None)
                return
