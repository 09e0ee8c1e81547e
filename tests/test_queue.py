"""BoundedQueue: order, bounds that refuse without changing anything, coalescing by key,
and getters that wait, are woken in turn and can be cancelled."""

from __future__ import annotations

import asyncio

import pytest

from backline._queue import BoundedQueue, QueueFull


def drain(queue: BoundedQueue[str]) -> list[str]:
    items = []
    while not queue.empty():
        items.append(queue.get_nowait())
    return items


def test_items_come_out_in_order_and_the_item_bound_refuses_without_a_change() -> None:
    queue: BoundedQueue[str] = BoundedQueue(max_items=3)
    for item in "abc":
        queue.put(item)
    with pytest.raises(QueueFull, match="more than 3 items"):
        queue.put("d")
    assert len(queue) == 3
    assert drain(queue) == ["a", "b", "c"]
    with pytest.raises(asyncio.QueueEmpty):
        queue.get_nowait()


def test_the_cost_bound_counts_what_is_queued() -> None:
    queue: BoundedQueue[str] = BoundedQueue(max_items=100, max_cost=10, cost=len)
    queue.put("12345")
    queue.put("1234")
    assert queue.cost == 9
    with pytest.raises(QueueFull, match="more than 10"):
        queue.put("xy")
    assert queue.cost == 9 and len(queue) == 2
    queue.put("z")
    assert queue.get_nowait() == "12345"
    assert queue.cost == 5
    queue.put("abcde")  # room again
    queue.clear()
    assert queue.cost == 0 and queue.empty()


def test_a_keyed_put_replaces_the_queued_item_and_moves_it_to_the_end() -> None:
    queue: BoundedQueue[str] = BoundedQueue(max_items=3, max_cost=100, cost=len)
    queue.put("state a1", key="a")
    queue.put("status")
    queue.put("state b1", key="b")
    for n in range(2, 50):  # a chatty source holds one slot
        queue.put(f"state a{n}", key="a")
    assert len(queue) == 3
    assert queue.cost == len("status") + len("state b1") + len("state a49")
    assert drain(queue) == ["status", "state b1", "state a49"]
    queue.put("state a50", key="a")  # the key is free again once taken
    queue.put("state a51", key="a")
    assert drain(queue) == ["state a51"]


def test_a_keyed_put_over_the_cost_bound_keeps_the_old_item() -> None:
    queue: BoundedQueue[str] = BoundedQueue(max_items=5, max_cost=10, cost=len)
    queue.put("small", key="k")
    with pytest.raises(QueueFull):
        queue.put("far too large", key="k")
    assert drain(queue) == ["small"]


def test_bad_bounds_are_refused() -> None:
    with pytest.raises(ValueError):
        BoundedQueue(max_items=0)
    with pytest.raises(ValueError):
        BoundedQueue(max_items=1, max_cost=10)  # a cost bound needs a cost function


async def test_get_waits_for_an_item_and_getters_are_served_in_turn() -> None:
    queue: BoundedQueue[str] = BoundedQueue(max_items=10)
    first = asyncio.create_task(queue.get())
    second = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    assert not first.done() and not second.done()
    queue.put("one")
    queue.put("two")
    assert await first == "one"
    assert await second == "two"


async def test_a_cancelled_getter_passes_its_wake_up_on() -> None:
    queue: BoundedQueue[str] = BoundedQueue(max_items=10)
    first = asyncio.create_task(queue.get())
    second = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    queue.put("only")  # wakes the first getter ...
    first.cancel()  # ... which is cancelled before it runs
    with pytest.raises(asyncio.CancelledError):
        await first
    assert await asyncio.wait_for(second, 5) == "only"
    assert queue.empty()
