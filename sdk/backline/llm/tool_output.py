"""What a tool may return, and how that reaches the model as text.

A tool (and a background session's state) may be a ``str``, ``int``, ``float``,
``bool`` or ``None``, or a list, tuple, set, frozenset or dict of those, nested
to any depth (dict keys are scalars). Serialising is explicit and keeps falsy
values: ``0`` gives ``0``, ``False`` gives ``false``, ``[]`` gives ``[]``,
``None`` gives ``null``; only ``""`` gives an empty string. A string is passed
through as it is; anything else becomes deterministic JSON.
"""

from __future__ import annotations

import copy
import json
import math
from typing import Any

_SCALARS = (str, int, float, bool, type(None))


def is_valid_tool_output(value: Any) -> bool:
    """Whether ``value`` follows the tool-output rule above."""
    return _valid(value, depth=0)


def _valid(value: Any, depth: int) -> bool:
    if depth > 64:
        return False
    if isinstance(value, _SCALARS):
        return not (isinstance(value, float) and not math.isfinite(value))
    if isinstance(value, list | tuple | set | frozenset):
        return all(_valid(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(
            isinstance(k, str | int | float | bool) and _valid(v, depth + 1)
            for k, v in value.items()
        )
    return False


def validate_tool_output(value: Any, *, what: str = "tool output") -> None:
    """Raise ``ValueError`` unless ``value`` follows the tool-output rule."""
    if not is_valid_tool_output(value):
        raise ValueError(
            f"{what} must be a string, number, bool, None, or a list/dict/tuple/set "
            f"of those (finite numbers, scalar dict keys); got {type(value).__name__}"
        )


def _jsonable(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, set | frozenset):
        items = [_jsonable(v) for v in value]
        try:
            return sorted(items)
        except TypeError:
            return sorted(items, key=lambda v: json.dumps(v, sort_keys=True))
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return value


def serialize_tool_output(value: Any) -> str:
    """The text the model reads for a (valid) tool output."""
    if isinstance(value, str):
        return value
    return json.dumps(_jsonable(value), ensure_ascii=False, sort_keys=True)


def snapshot_tool_output(value: Any, *, what: str = "tool output") -> Any:
    """Validate and deep-copy, so later changes to the caller's object change nothing."""
    validate_tool_output(value, what=what)
    if isinstance(value, _SCALARS):
        return value
    return copy.deepcopy(value)
