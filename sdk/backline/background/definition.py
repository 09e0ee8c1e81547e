"""``@background``: define a background session (validated, immutable, reusable)."""

from __future__ import annotations

import dataclasses
import inspect
import string
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias, TypedDict

import docstring_parser

if TYPE_CHECKING:
    from .context import BackgroundContext

Entrypoint: TypeAlias = Callable[["BackgroundContext"], Awaitable[None]]
Template: TypeAlias = str | Callable[[Mapping[str, Any]], str]
InstanceFactory: TypeAlias = Callable[[str, "str | None"], "BackgroundDefinition"]
"""``instances(name, value)``: the definition of one instance of a background (its own
description, instructions and entrypoint configured by ``value``); the runtime then
names it ``name`` (see ``BackgroundDefinition.instance``)."""


class UpdatePromptArgs(TypedDict):
    """What an ``update_template`` receives (wraps each message a background sends)."""

    background_session_id: str
    background_session_description: str
    message: str


class ReplyPromptArgs(TypedDict):
    """What the reply templates receive (instructions for the coalesced spoken reply)."""

    background_session_id: str
    message_ids: list[str]


class HandlingOptions(TypedDict, total=False):
    """How a background's messages are wrapped and replied to. Each template is a
    ``str.format`` string with named fields, or a callable given the argument mapping."""

    update_template: Template
    reply_at_tail_template: Template
    reply_maybe_covered_template: Template


DEFAULT_UPDATE_TEMPLATE = "Background session `{background_session_id}` sent an update:\n{message}"
DEFAULT_REPLY_AT_TAIL = (
    "New updates arrived from background session `{background_session_id}`. Tell the user "
    "about them naturally and briefly, without repeating them word for word."
)
DEFAULT_REPLY_MAYBE_COVERED = (
    "New updates arrived from background session `{background_session_id}`. You may "
    "already have mentioned them: respond only with information the user has not heard "
    "yet."
)

_TEMPLATE_FIELDS: dict[str, frozenset[str]] = {
    "update_template": frozenset(UpdatePromptArgs.__annotations__),
    "reply_at_tail_template": frozenset(ReplyPromptArgs.__annotations__),
    "reply_maybe_covered_template": frozenset(ReplyPromptArgs.__annotations__),
}
_DEFAULTS: dict[str, str] = {
    "update_template": DEFAULT_UPDATE_TEMPLATE,
    "reply_at_tail_template": DEFAULT_REPLY_AT_TAIL,
    "reply_maybe_covered_template": DEFAULT_REPLY_MAYBE_COVERED,
}


def validate_handling(handling: Mapping[str, Any] | None, *, where: str) -> dict[str, Any] | None:
    """Check option keys and template fields; return a snapshot (a new dict)."""
    if handling is None:
        return None
    if not isinstance(handling, Mapping):
        raise TypeError(
            f"{where}: handling options must be a mapping, got {type(handling).__name__}"
        )
    unknown = sorted(set(handling) - set(_TEMPLATE_FIELDS))
    if unknown:
        raise ValueError(
            f"{where}: unknown handling option(s) {', '.join(unknown)}; "
            f"known: {', '.join(sorted(_TEMPLATE_FIELDS))}"
        )
    snapshot: dict[str, Any] = {}
    for key, template in handling.items():
        if isinstance(template, str):
            fields = {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}
            bad = sorted(
                f for f in fields if f.split(".")[0].split("[")[0] not in _TEMPLATE_FIELDS[key]
            )
            if bad or "" in fields:
                raise ValueError(
                    f"{where}: {key} uses unknown field(s) {', '.join(bad) or '{}'}; "
                    f"available: {', '.join(sorted(_TEMPLATE_FIELDS[key]))}"
                )
        elif not callable(template):
            raise TypeError(f"{where}: {key} must be a format string or a callable")
        snapshot[key] = template
    return snapshot


def render_template(handling: Mapping[str, Any] | None, key: str, args: Mapping[str, Any]) -> str:
    """Render one template; options missing a key fall back to the built-in default."""
    template: Template = (handling or {}).get(key, _DEFAULTS[key])
    if isinstance(template, str):
        return template.format(**args)
    text = template(dict(args))
    if not isinstance(text, str):
        raise TypeError(f"{key} callable must return a string, got {type(text).__name__}")
    return text


def _check_entrypoint(fn: Any) -> None:
    is_async = inspect.iscoroutinefunction(fn) or (
        not inspect.isfunction(fn)
        and callable(fn)
        and inspect.iscoroutinefunction(getattr(fn, "__call__", None))  # noqa: B004
    )
    if not is_async:
        raise TypeError(
            f"a background entrypoint must be an async function (async def), got {fn!r}"
        )
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        raise TypeError(
            "a background entrypoint must take exactly one context argument "
            "(its signature could not be read)"
        ) from None
    params = list(sig.parameters.values())
    ok = (
        len(params) == 1
        and params[0].kind in (params[0].POSITIONAL_ONLY, params[0].POSITIONAL_OR_KEYWORD)
        and params[0].default is inspect.Parameter.empty
    )
    if not ok:
        raise TypeError(
            f"a background entrypoint must take exactly one context argument, got {sig}"
        )


def _check_name(name: Any) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ValueError("background name must be non-empty")
    if not all(c.isalnum() or c in "_-." for c in name):
        raise ValueError(f"background name {name!r} may use only letters, digits, '_', '-' and '.'")
    return name


def _docstring_description(fn: Any) -> str:
    doc = inspect.getdoc(fn)
    if not doc:
        return ""
    parsed = docstring_parser.parse(doc)
    return "\n\n".join(p for p in (parsed.short_description, parsed.long_description) if p).strip()


@dataclass(frozen=True)
class BackgroundDefinition:
    """An immutable background session definition, reusable across sessions.

    Build it with ``@background(...)``. Each session that uses it gets its own
    runtime (inbox, context, reply scheduler, message ids).

    ``instance(name, value)`` makes another background from it (``--background
    ID:NAME=VALUE``): ``instance_of`` is then the id it was made from and ``value``
    the value it was given (``ctx.value``); ``instance_value`` says what a value sets
    (None: it takes none) and ``instances`` builds an instance's definition.
    """

    id: str
    description: str
    entrypoint: Entrypoint
    interrupt_grace: float = 2.0
    _handling: tuple[tuple[str, Any], ...] | None = field(default=None, repr=False)
    voice_instructions: str | None = None
    instance_value: str | None = None
    instances: InstanceFactory | None = field(default=None, repr=False, compare=False)
    instance_of: str | None = None
    value: str | None = None

    def __post_init__(self) -> None:
        validate_definition(self)

    def instance(self, name: str | None = None, value: str | None = None) -> BackgroundDefinition:
        """Another background made from this one: named ``name`` (default: this id), and
        configured by ``value`` when this background takes one (``instance_value``).

        With an ``instances`` factory, it builds the instance's definition (its own
        description and configuration); without one, the instance is a renamed copy
        whose entrypoint reads ``ctx.value``. Raises ``ValueError`` for a bad name, or
        a value this background does not take (or that its factory refuses).
        """
        name = self.id if name is None else _check_name(name)
        base = self.instance_of or self.id
        if value is not None:
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"the value of background {name!r} must be a non-blank string")
            if self.instance_value is None:
                raise ValueError(
                    f"background {base!r} takes no value: run it as {base} or {base}:NAME, "
                    "without '=VALUE'"
                )
        made = self if self.instances is None else self.instances(name, value)
        if not isinstance(made, BackgroundDefinition):
            raise TypeError(
                f"the instances factory of background {base!r} must return a "
                f"BackgroundDefinition, got {type(made).__name__}"
            )
        return dataclasses.replace(made, id=name, instance_of=base, value=value)

    @property
    def handling(self) -> HandlingOptions | None:
        """A fresh copy of the handling options (changing it changes nothing)."""
        if self._handling is None:
            return None
        return dict(self._handling)  # type: ignore[return-value]


def validate_definition(definition: Any) -> None:
    """Re-check a definition (the session does, so a hand-built one is checked too)."""
    if not isinstance(definition, BackgroundDefinition):
        raise TypeError(
            f"expected a BackgroundDefinition (use @background), got {type(definition).__name__}"
        )
    _check_name(definition.id)
    _check_entrypoint(definition.entrypoint)
    if not isinstance(definition.description, str) or not definition.description.strip():
        raise ValueError("background session description must be non-empty")
    guidance = definition.voice_instructions
    if guidance is not None and (not isinstance(guidance, str) or not guidance.strip()):
        raise ValueError("voice_instructions must be a non-blank string, or None")
    grace = definition.interrupt_grace
    if isinstance(grace, bool) or not isinstance(grace, int | float) or grace < 0:
        raise ValueError("interrupt_grace must be a number of seconds >= 0")
    what = definition.instance_value
    if what is not None and (not isinstance(what, str) or not what.strip()):
        raise ValueError("instance_value must be a non-blank string (what a value sets), or None")
    if definition.instances is not None and not callable(definition.instances):
        raise TypeError("instances must be a function instances(name, value), or None")
    if definition.value is not None and not isinstance(definition.value, str):
        raise TypeError("a background's value must be a string, or None")


def background(
    name: str,
    *,
    description: str | None = None,
    interrupt_grace: float = 2.0,
    handling: HandlingOptions | None = None,
    voice_instructions: str | None = None,
    instance_value: str | None = None,
    instances: InstanceFactory | None = None,
) -> Callable[[Entrypoint], BackgroundDefinition]:
    """Define a background session named ``name`` from an async entrypoint.

    The entrypoint takes one ``BackgroundContext``. The description (what the
    voice agent reads in its tools) falls back to the entrypoint's docstring.
    ``voice_instructions`` is optional guidance for the voice agent on working
    with this background; front ends that build a default agent (``backline
    console``, ``backline web``) add it to the agent's instructions.

    Several instances of it can run in one session (``definition.instance(name,
    value)``; ``--background ID:NAME=VALUE``). ``instance_value`` says what a value
    sets ("the folder it works in"): without it, an instance takes no value.
    ``instances(name, value)`` builds an instance's own definition; without it an
    instance is this definition renamed, its entrypoint reading ``ctx.value``.
    """
    _check_name(name)
    snapshot = validate_handling(handling, where=f"@background({name!r})")

    def decorate(entrypoint: Entrypoint) -> BackgroundDefinition:
        _check_entrypoint(entrypoint)
        desc = description or _docstring_description(entrypoint)
        return BackgroundDefinition(
            id=name,
            description=desc,
            entrypoint=entrypoint,
            interrupt_grace=interrupt_grace,
            _handling=None if snapshot is None else tuple(snapshot.items()),
            voice_instructions=voice_instructions,
            instance_value=instance_value,
            instances=instances,
        )

    return decorate
