"""What kind of update a spoken send is, and its place on the floor.

Background updates are voiced one at a time (the reply scheduler's floor), the most
urgent first: a question that needs an answer, then failures, then completions, then
progress. ``ctx.send(text, kind=...)`` says which; without a kind, a text that ends
with a question mark is a question and anything else progress. A background whose
status says it failed (it crashed, or a turn raised) or ended raises what it still has
waiting to a failure or a completion.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias, get_args

UpdateKind: TypeAlias = Literal["question", "failed", "finished", "progress"]
"""What a spoken update is: ``question`` (it needs the user's answer), ``failed``,
``finished`` or ``progress``; the order they are voiced in when several wait."""

KINDS: tuple[str, ...] = get_args(UpdateKind)
PRIORITY: dict[str, int] = {kind: len(KINDS) - i for i, kind in enumerate(KINDS)}
URGENT = len(KINDS) + 1
"""The place on the floor of an update sent with ``interrupt=True``: before any other."""

INTRODUCE = (
    "Several background sessions run: say first whose update this is, by its name "
    "(`{background_session_id}: ...`)."
)
"""Added to a reply's instructions when the session runs several backgrounds."""


def update_kind(text: str, kind: Any, *, question: bool = False) -> str:
    """The kind of a spoken send: ``kind`` when given (checked), else inferred."""
    if kind is None:
        return "question" if question or text.rstrip().endswith("?") else "progress"
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    return str(kind)


def status_priority(status: str, error: str | None) -> int | None:
    """What a background's status makes of the updates it still has waiting: a
    failure (crashed, or a turn that raised), a completion (ended), or nothing."""
    if status == "crashed" or error is not None:
        return PRIORITY["failed"]
    if status == "ended":
        return PRIORITY["finished"]
    return None
