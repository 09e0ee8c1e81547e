"""What a tool may return, and how that reaches the model as text.

A tool (and a background session's state) may be a ``str``, ``int``, ``float``,
``bool`` or ``None``, or a list, tuple, set, frozenset or dict of those, nested
(at most ``Limits.max_value_depth`` deep, without self-references). Dict keys are
scalars: ``str``, ``int``, ``float`` or ``bool``; a non-string key becomes its JSON
text, as in JSON itself (``{1: "one", "phase": "x"}`` reads
``{"1": "one", "phase": "x"}``), and two keys with the same JSON text (``1`` and
``"1"``) are an error. Numbers must be finite.

Serialising is explicit and keeps falsy values: ``0`` gives ``0``, ``False`` gives
``false``, ``[]`` gives ``[]``, ``None`` gives ``null``; only ``""`` gives an empty
string. A string is passed through as it is; anything else becomes deterministic
JSON (sorted keys; a set's items sorted).

Every check and conversion is one walk (``json_snapshot``): it returns the value's
JSON form (lists, string keys), optionally cut to a size with visible markers, and
its errors say what is wrong and where (``state["a"][3] is a datetime``).
"""

from __future__ import annotations

import json
import math
from typing import Any, NamedTuple

from ..limits import DEFAULT_LIMITS, cut_marker, truncate_text

_BIG = 10**4000  # integers this large may have more digits than Python turns into text

CUT_KEY = "[truncated]"
"""The key of the marker entry that ends a dict cut at a size limit."""

_RULE = (
    "must be a string, number, bool, None, or a list/tuple/set/dict of those "
    "(finite numbers; dict keys str, int, float or bool)"
)


class JsonSnapshot(NamedTuple):
    """A value's JSON form (a fresh copy) and whether it was cut at a size limit."""

    value: Any
    cut: bool


class _SetItem:
    """A path step into a set (its items have no index of their own)."""

    __slots__ = ()


_SET_ITEM = _SetItem()


def _step(key: Any) -> str:
    if key is _SET_ITEM:
        return "[<a set item>]"
    if isinstance(key, str):
        return "[" + json.dumps(key, ensure_ascii=False) + "]"
    return f"[{key!r}]"


def _describe(value: Any) -> str:
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name} ({text})"


class _Invalid(Exception):
    """A rule broken somewhere inside a value; the path is collected on the way out."""

    def __init__(self, problem: str, back_to: int | None = None) -> None:
        super().__init__(problem)
        self.problem = problem
        self.back_to = back_to  # a self-reference: the depth of the container it names
        self.steps: list[Any] = []  # innermost first


class _Walk:
    """One walk over a value: validate, convert to the JSON form, cut at a budget.

    Paths cost nothing on the way down: a broken rule raises ``_Invalid``, and each
    container adds its step as the exception passes through it.
    """

    __slots__ = ("_open", "budget", "cut", "limit", "max_depth", "what")

    def __init__(self, what: str, max_chars: int | None, max_depth: int) -> None:
        self.what = what
        self.limit = max_chars
        self.budget: float = math.inf if max_chars is None else max_chars
        self.max_depth = max_depth
        self.cut = False
        self._open: dict[int, int] = {}  # id -> depth of the containers on the current path

    def marker(self, cut: int, unit: str) -> str:
        self.cut = True
        assert self.limit is not None
        return cut_marker(cut, unit, self.what, self.limit)

    def value(self, v: Any, depth: int) -> Any:
        t = type(v)
        if t is str:
            return self.string(v)
        if t is int or t is float:
            if self.budget != math.inf:
                self.budget -= len(self.number(v))
            elif (t is float and not math.isfinite(v)) or (t is int and not -_BIG < v < _BIG):
                self.number(v)  # raises if JSON cannot have it
            return v
        if v is None:
            self.budget -= 4
            return None
        if t is bool:
            self.budget -= 5
            return v
        if t is list or t is dict or t is tuple:
            return self.container(v, depth)
        # Subclasses (a StrEnum, an IntEnum, an OrderedDict ...) and sets.
        if isinstance(v, str):
            return self.string(str.__str__(v))
        if isinstance(v, bool):
            return self.value(bool(v), depth)
        if isinstance(v, int):
            return self.value(int(v), depth)
        if isinstance(v, float):
            return self.value(float(v), depth)
        if isinstance(v, list | tuple | set | frozenset | dict):
            return self.container(v, depth)
        raise _Invalid(f"is {_describe(v)}; a value {_RULE}")

    def container(self, v: Any, depth: int) -> Any:
        key = id(v)
        if key in self._open:
            raise _Invalid("", back_to=self._open[key])
        if depth >= self.max_depth:
            raise _Invalid(
                f"is nested more than {self.max_depth} levels deep; flatten it "
                "(the bound is Limits.max_value_depth)"
            )
        self._open[key] = depth
        try:
            if isinstance(v, dict):
                return self.mapping(v, depth)
            if isinstance(v, set | frozenset):
                return self.sequence(self.set_order(v, depth), depth, set_items=True)
            return self.sequence(v, depth, set_items=False)
        finally:
            del self._open[key]

    def string(self, v: str) -> str:
        size = len(v) + 2
        if size <= self.budget:
            self.budget -= size
            return v
        keep = max(0, int(self.budget) - 2)
        self.budget = 0
        return v[:keep] + self.marker(len(v) - keep, "characters")

    @staticmethod
    def number(v: int | float) -> str:
        if isinstance(v, float):
            if not math.isfinite(v):
                raise _Invalid(f"is {v!r}; numbers must be finite (JSON has no {v!r})")
            return float.__repr__(v)
        try:
            return int.__repr__(v)
        except ValueError as e:  # more digits than Python converts to text
            raise _Invalid(f"is an integer too large for JSON ({e})") from None

    def key(self, k: Any) -> str:
        t = type(k)
        if t is str:
            return str(k)
        if isinstance(k, str):
            return str.__str__(k)
        if isinstance(k, bool):
            return "true" if k else "false"
        if isinstance(k, int | float):
            try:
                return self.number(k)
            except _Invalid as e:
                e.steps.append(k)
                raise
        raise _Invalid(
            f"has a key that is {_describe(k)}; dict keys must be str, int, float or bool"
        )

    def mapping(self, v: dict[Any, Any], depth: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        original: dict[str, Any] = {}
        self.budget -= 2
        inner = depth + 1
        for done, (k, item) in enumerate(v.items()):
            if self.budget <= 0:
                out[CUT_KEY] = self.marker(len(v) - done, "keys")
                break
            text = self.key(k)
            if text in original:
                raise _Invalid(
                    f"has the keys {original[text]!r} and {k!r}, which are the same JSON "
                    f"key {json.dumps(text)}; keep one of them"
                )
            original[text] = k
            self.budget -= len(text) + 6
            try:
                out[text] = self.value(item, inner)
            except _Invalid as e:
                e.steps.append(k)
                raise
        return out

    def sequence(self, items: Any, depth: int, *, set_items: bool) -> list[Any]:
        out: list[Any] = []
        self.budget -= 2
        inner = depth + 1
        for i, item in enumerate(items):
            if self.budget <= 0:
                out.append(self.marker(len(items) - i, "items"))
                break
            self.budget -= 2
            try:
                out.append(self.value(item, inner))
            except _Invalid as e:
                e.steps.append(_SET_ITEM if set_items else i)
                raise
        return out

    def set_order(self, v: set[Any] | frozenset[Any], depth: int) -> list[Any]:
        """A set's items in a deterministic order (strings, or numbers, sorted directly;
        anything else by its JSON text)."""
        items = list(v)
        if all(type(x) is str for x in items) or all(type(x) in (int, float) for x in items):
            return sorted(items)
        inner = _Walk(self.what, None, self.max_depth)

        def order(x: Any) -> str:
            try:
                return json.dumps(inner.value(x, depth + 1), sort_keys=True, ensure_ascii=False)
            except _Invalid as e:
                e.steps.append(_SET_ITEM)
                raise

        return sorted(items, key=order)


def _where(root: str, path: list[Any]) -> str:
    if len(path) > 8:
        return root + "".join(map(_step, path[:4])) + "..." + "".join(map(_step, path[-2:]))
    return root + "".join(map(_step, path))


def _error(what: str, root: str, e: _Invalid) -> ValueError:
    path = e.steps[::-1]
    problem = e.problem
    if e.back_to is not None:
        problem = (
            f"refers back to {_where(root, path[: e.back_to])}, which contains it "
            "(a self-reference); a value must be a tree, without cycles"
        )
    if not path:
        return ValueError(f"{what} {problem}")
    return ValueError(f"{what}: {_where(root, path)} {problem}")


def json_snapshot(
    value: Any,
    *,
    what: str = "tool output",
    root: str = "value",
    max_chars: int | None = None,
    max_depth: int = DEFAULT_LIMITS.max_value_depth,
) -> JsonSnapshot:
    """``value``'s JSON form (a fresh copy: lists, string keys, sets sorted), cut to about
    ``max_chars`` characters of JSON text if given.

    Raises ``ValueError`` naming where the value breaks the rule above (``what`` names
    the value, ``root`` starts the path: ``state["a"][3]``). What is cut away at
    ``max_chars`` is not examined, so the cost is bounded by ``max_chars``.
    """
    walk = _Walk(what, max_chars, max_depth)
    try:
        copy = walk.value(value, 0)
    except _Invalid as e:
        raise _error(what, root, e) from None
    except RecursionError:
        raise ValueError(f"{what} is nested too deeply to examine") from None
    return JsonSnapshot(copy, walk.cut)


def is_valid_tool_output(value: Any) -> bool:
    """Whether ``value`` follows the tool-output rule above."""
    try:
        json_snapshot(value)
    except ValueError:
        return False
    return True


def validate_tool_output(value: Any, *, what: str = "tool output") -> None:
    """Raise ``ValueError`` (saying what is wrong, and where) unless ``value`` follows
    the tool-output rule."""
    json_snapshot(value, what=what)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def serialize_tool_output(value: Any) -> str:
    """The text the model reads for a (valid) tool output."""
    if isinstance(value, str):
        return str(value)
    return _dumps(json_snapshot(value).value)


def render_tool_output(
    value: Any,
    max_chars: int,
    *,
    what: str = "tool output",
    max_depth: int = DEFAULT_LIMITS.max_value_depth,
) -> JsonSnapshot:
    """The text the model reads for ``value``, cut to about ``max_chars`` characters with
    a visible marker; ``cut`` says whether it was. A string is cut as text, anything
    else as a value (so the text stays valid JSON). Raises ``ValueError`` like
    ``json_snapshot``."""
    if isinstance(value, str):
        text, cut = truncate_text(str(value), max_chars, what)
        return JsonSnapshot(text, cut)
    snap = json_snapshot(value, what=what, root="result", max_chars=max_chars, max_depth=max_depth)
    return JsonSnapshot(_dumps(snap.value), snap.cut)


def snapshot_tool_output(value: Any, *, what: str = "tool output") -> Any:
    """Validate and copy to the JSON form, so later changes to the caller's object
    change nothing."""
    return json_snapshot(value, what=what).value
