"""What the OpenAI Realtime server holds: its conversation items, in order, each with its
signature (``_realtime_items``), and the milliseconds of audio of each spoken reply.

The reader places items as the server reports them (a response's output where it was
added, a committed utterance after the item the server names), and a sync asks it
what to send (``truncation``, then ``plan``).
"""

from __future__ import annotations

from collections.abc import Sequence

from ._realtime_items import Item, Signature, SyncPlan, plan_sync, plan_truncation

BYTES_PER_MS = 48  # 24 kHz, 16-bit mono


class Held:
    def __init__(self) -> None:
        self.items: list[tuple[str, Signature]] = []
        self.audio_ms: dict[str, float] = {}  # assistant item id -> ms of its audio

    def clear(self) -> None:
        self.items = []
        self.audio_ms.clear()

    def _index(self, item_id: str) -> int | None:
        for n, (held_id, _) in enumerate(self.items):
            if held_id == item_id:
                return n
        return None

    def reserve(self, item_id: str) -> None:
        """An item in its place; what it says is not known yet (it matches nothing)."""
        self.items.append((item_id, ("pending", item_id)))

    def place(self, item_id: str, signature: Signature) -> None:
        """``item_id`` says ``signature`` (in its place, or last)."""
        n = self._index(item_id)
        if n is None:
            self.items.append((item_id, signature))
        else:
            self.items[n] = (item_id, signature)

    def place_after(self, item_id: str, previous: str | None) -> None:
        """A committed utterance, after ``previous`` (first when ``None``), not yet
        transcribed."""
        n = self._index(previous) if previous is not None else -1
        at = len(self.items) if n is None else n + 1
        self.items.insert(at, (item_id, ("pending", item_id)))

    def heard(self, item_id: str, transcript: str) -> None:
        if self._index(item_id) is not None:
            self.place(item_id, ("message", "user", transcript))

    def add_audio(self, item_id: str, nbytes: int) -> None:
        self.audio_ms[item_id] = self.audio_ms.get(item_id, 0.0) + nbytes / BYTES_PER_MS

    def truncation(self, wanted: Sequence[Item]) -> tuple[str, int] | None:
        """A spoken reply the context cut to what was heard: its id and ``audio_end_ms``
        (held as cut from now on)."""
        cut = plan_truncation(self.items, wanted, self.audio_ms)
        if cut is None:
            return None
        index, audio_end_ms, signature = cut
        item_id = self.items[index][0]
        self.items[index] = (item_id, signature)
        return item_id, audio_end_ms

    def plan(self, wanted: Sequence[Item]) -> SyncPlan:
        """What to delete and create; the deleted items are forgotten at once."""
        plan = plan_sync(self.items, wanted)
        del self.items[plan.keep :]
        for item_id in plan.delete:
            self.audio_ms.pop(item_id, None)
        return plan

    def calls(self) -> set[str]:
        """The call ids of the function calls held."""
        return {s[1] for _, s in self.items if s[0] == "function_call"}
