"""Registration kinds: what one registration hook registers, and how its items are named.

A kind ties a hook (``register_llms``) to the ``register`` callback its plugins
receive: ``make`` validates what a plugin passed to ``register`` and names the
item. Names are unique per kind across plugins; a second plugin registering a
taken name fails as a whole (a clash). backline's own kinds (backgrounds, tools,
LLMs, options) are kinds like those a plugin adds with ``register_hookspecs``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Generic, Protocol, TypeAlias, TypeVar

T = TypeVar("T")

Namespace: TypeAlias = ModuleType | type
"""Where hookspecs are defined: a module or a class (``pluggy``'s ``add_hookspecs``)."""


@dataclass(frozen=True)
class RegistrationKind(Generic[T]):
    """A kind of item plugins register through one hook.

    - ``name``: the kind, as ``PluginManager.owner(kind, name)`` and clashes name it
      (``"exporter"``); unique across kinds.
    - ``hook``: the registration hook (``"register_exporters"``); its spec
      takes one argument, ``register``.
    - ``make``: called as ``make(plugin, *args, **kwargs)`` with the registering
      plugin's name and what the plugin passed to ``register``. It validates them
      (a ``TypeError`` or ``ValueError`` that says what was wrong fails the plugin)
      and returns ``(name, item)``. Its docstring becomes the callback's.
    - ``label``: how messages name one item's name (``"report exporter"``);
      defaults to ``name`` with spaces.
    - ``key``: the key of the plugin's registrations in ``PluginInfo.registered()``
      and ``backline plugins --json`` (``"exporters"``); defaults to ``hook``
      without its ``register_`` prefix.
    - ``reserved``: optional, ``reserved(name, item)`` returns a name the item takes
      that backline keeps for itself (the item then clashes with ``RESERVED_OWNER``),
      or ``None``.
    """

    name: str
    hook: str
    make: Callable[..., tuple[str, T]]
    label: str = ""
    key: str = ""
    reserved: Callable[[str, T], str | None] | None = None

    def __post_init__(self) -> None:
        for field_name in ("name", "hook"):
            value = getattr(self, field_name)
            if not isinstance(value, str) or not value.isidentifier():
                raise ValueError(
                    f"RegistrationKind.{field_name} must be an identifier, got {value!r}"
                )
        if not callable(self.make):
            raise TypeError(f"RegistrationKind {self.name!r}: make must be callable")
        if not self.label:
            object.__setattr__(self, "label", self.name.replace("_", " "))
        if not self.key:
            object.__setattr__(self, "key", self.hook.removeprefix("register_"))
        if not self.key.isidentifier():
            raise ValueError(f"RegistrationKind.key must be an identifier, got {self.key!r}")


def check_name(hook: str, what: str, name: Any) -> str:
    """``name`` if it is a non-empty word (no spaces), else a ``ValueError`` naming ``hook``."""
    if not isinstance(name, str) or not name.strip() or any(c.isspace() for c in name):
        raise ValueError(f"{hook}: {what} must be a non-empty word, got {name!r}")
    return name


class RegisterHookspecs(Protocol):
    """The ``register`` argument of ``register_hookspecs``."""

    def __call__(
        self, hookspecs: Namespace, *, kinds: Sequence[RegistrationKind[Any]] = ()
    ) -> None: ...
