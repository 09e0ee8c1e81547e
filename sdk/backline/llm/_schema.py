"""JSON Schema from Python type hints, and the converter back to Python values.

Each supported annotation yields a ``(schema, convert)`` pair: ``schema`` is
what the model sees; ``convert`` turns validated JSON into the value the tool
receives (an ``Enum`` member, a dataclass instance, a tuple, a set ...).
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, Union, get_args, get_origin

Converter = Callable[[Any], Any]


def _identity(value: Any) -> Any:
    return value


_NONE_SCHEMA: dict[str, Any] = {"type": "null"}


class SchemaError(TypeError):
    """An annotation that cannot become a JSON Schema."""


def schema_for(tp: Any, *, _seen: frozenset[Any] = frozenset()) -> tuple[dict[str, Any], Converter]:
    """The JSON Schema of ``tp`` and a converter from JSON to that type."""
    if tp is Any or tp is object or tp is inspect_empty:
        return {}, _identity
    if tp is type(None) or tp is None:
        return dict(_NONE_SCHEMA), _identity
    if tp is str:
        return {"type": "string"}, _identity
    if tp is bool:
        return {"type": "boolean"}, _identity
    if tp is int:
        return {"type": "integer"}, _identity
    if tp is float:
        return {"type": "number"}, lambda v: float(v) if isinstance(v, int) else v

    origin = get_origin(tp)
    args = get_args(tp)

    if origin is typing.Annotated:
        schema, conv = schema_for(args[0], _seen=_seen)
        for meta in args[1:]:
            if isinstance(meta, str):
                schema = {**schema, "description": meta}
        return schema, conv

    if origin is Literal:
        values = list(args)
        schema = {"enum": values}
        kinds = {_json_type(v) for v in values}
        if len(kinds) == 1:
            schema = {"type": kinds.pop(), "enum": values}
        return schema, _identity

    if origin is Union or origin is types.UnionType:
        members = [a for a in args if a is not type(None)]
        nullable = len(members) != len(args)
        parts = [schema_for(m, _seen=_seen) for m in members]
        if len(parts) == 1 and nullable:
            inner, conv = parts[0]
            one_conv = conv
            return {"anyOf": [inner, dict(_NONE_SCHEMA)]}, (
                lambda v: None if v is None else one_conv(v)
            )
        schemas = [s for s, _ in parts] + ([dict(_NONE_SCHEMA)] if nullable else [])
        checks = [(_checker(s), c) for s, c in parts]

        def convert_union(v: Any) -> Any:
            if v is None:
                return None
            for check, conv in checks:
                if check(v):
                    return conv(v)
            return v

        return {"anyOf": schemas}, convert_union

    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        values = [m.value for m in tp]
        kinds = {_json_type(v) for v in values}
        schema = {"enum": values}
        if len(kinds) == 1:
            schema = {"type": kinds.pop(), "enum": values}
        enum_cls = tp
        return schema, lambda v: enum_cls(v)

    if origin in (list, Sequence, typing.Sequence, tuple, set, frozenset) or tp in (
        list,
        tuple,
        set,
        frozenset,
    ):
        container = origin or tp
        if container is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
            item_parts = [schema_for(a, _seen=_seen) for a in args]
            convs = [c for _, c in item_parts]
            return (
                {
                    "type": "array",
                    "prefixItems": [s for s, _ in item_parts],
                    "minItems": len(args),
                    "maxItems": len(args),
                },
                lambda v: tuple(c(x) for c, x in zip(convs, v, strict=True)),
            )
        item_tp = args[0] if args else Any
        item_schema, item_conv = schema_for(item_tp, _seen=_seen)
        schema = {"type": "array", "items": item_schema}
        if container in (set, frozenset):
            schema["uniqueItems"] = True
        build: Callable[[Any], Any] = {
            tuple: tuple,
            set: set,
            frozenset: frozenset,
        }.get(container, list)
        return schema, lambda v: build(item_conv(x) for x in v)

    if origin in (dict, Mapping, typing.Mapping) or tp is dict:
        key_tp = args[0] if args else str
        if key_tp not in (str, Any):
            raise SchemaError(f"dict keys must be str for a JSON object, not {key_tp!r}")
        val_schema, val_conv = schema_for(args[1] if len(args) > 1 else Any, _seen=_seen)
        schema = {"type": "object"}
        if val_schema:
            schema["additionalProperties"] = val_schema
        return schema, lambda v: {k: val_conv(x) for k, x in v.items()}

    if _is_typeddict(tp):
        return _object_schema(tp, _seen, typeddict=True)

    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _object_schema(tp, _seen, typeddict=False)

    raise SchemaError(f"unsupported type for a tool parameter: {tp!r}")


class _InspectEmpty:
    pass


inspect_empty: Any = _InspectEmpty


def _is_typeddict(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__required_keys__")


def _object_schema(
    tp: type[Any], seen: frozenset[Any], *, typeddict: bool
) -> tuple[dict[str, Any], Converter]:
    if tp in seen:
        raise SchemaError(f"recursive type {tp.__name__} cannot become a JSON Schema")
    seen = seen | {tp}
    hints = typing.get_type_hints(tp, include_extras=True)
    properties: dict[str, Any] = {}
    converters: dict[str, Converter] = {}
    required: list[str] = []
    if typeddict:
        required_keys: frozenset[str] = tp.__required_keys__
        names = list(hints)
        for name in names:
            if name in required_keys:
                required.append(name)
    else:
        names = []
        for f in dataclasses.fields(tp):
            if not f.init:
                continue
            names.append(f.name)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                required.append(f.name)
    for name in names:
        prop, conv = schema_for(hints[name], _seen=seen)
        properties[name] = prop
        converters[name] = conv
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }
    if tp.__doc__ and not typeddict and not tp.__doc__.startswith(tp.__name__ + "("):
        schema["description"] = tp.__doc__.strip()

    def convert(v: Any) -> Any:
        data = {k: converters[k](x) for k, x in v.items() if k in converters}
        return data if typeddict else tp(**data)

    return schema, convert


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if value is None:
        return "null"
    raise SchemaError(f"a Literal or Enum value must be a JSON scalar, not {value!r}")


def _checker(schema: dict[str, Any]) -> Callable[[Any], bool]:
    from jsonschema import Draft202012Validator

    validator = Draft202012Validator(schema)
    return lambda v: bool(validator.is_valid(v))
