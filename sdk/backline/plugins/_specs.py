"""The hooks a manager knows: backline's own, and those plugins add with ``register_hookspecs``.

pluggy lets implementations come before their specification: a plugin may
implement a hook that a plugin loaded later specifies (pluggy keeps the
implementation unverified until ``add_hookspecs``). This table adds a plugin's
specifications (all of them, or none: a name another plugin or backline already
specifies is a clash), the registration kinds that come with them, and checks
the implementations already waiting for them without blaming the wrong plugin.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import pluggy

from . import _hookspecs
from ._core_kinds import CORE_KINDS
from ._hookspecs import PROJECT_NAME
from ._info import RESERVED_KEYS
from ._kinds import Namespace, RegistrationKind
from ._registry import KIND_LABELS, RESERVED_OWNER, Clash, ClashError, RegistrationClosed


@dataclass
class SpecBatch:
    """One plugin's ``register_hookspecs`` calls, checked as they come, added together."""

    plugin: str
    namespaces: list[Namespace] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    kinds: list[RegistrationKind[Any]] = field(default_factory=list)
    open: bool = False


class Specs:
    """The hook specifications and registration kinds of one pluggy manager."""

    def __init__(self, pm: pluggy.PluginManager) -> None:
        pm.add_hookspecs(_hookspecs)
        self._pm = pm
        self._owners = {name: RESERVED_OWNER for name in _spec_names(pm, _hookspecs)}
        self._kinds: dict[str, tuple[RegistrationKind[Any], str]] = {
            k.name: (k, RESERVED_OWNER) for k in CORE_KINDS
        }

    # -- what is known --------------------------------------------------------------------
    def kinds(self) -> list[RegistrationKind[Any]]:
        """Every registration kind: backline's, then plugins' in the order they came."""
        return [kind for kind, _ in self._kinds.values()]

    def plugin_kinds(self) -> list[RegistrationKind[Any]]:
        return [kind for kind, owner in self._kinds.values() if owner != RESERVED_OWNER]

    def specified(self, hook: str) -> bool:
        caller: pluggy.HookCaller | None = getattr(self._pm.hook, hook, None)
        return caller is not None and caller.has_spec()

    def unknown_hook_message(self, plugin: str, hook: str) -> str:
        """Why ``plugin``'s implementation of ``hook`` (specified by no plugin) is refused."""
        known = sorted(self._owners)
        close = difflib.get_close_matches(hook, known, n=1, cutoff=0.8)
        if close:
            return (
                f"plugin '{plugin}' implements unknown hook '{hook}' (did you mean '{close[0]}'?)"
            )
        return (
            f"plugin '{plugin}' implements unknown hook '{hook}'; hooks: {', '.join(known)}. "
            "If another plugin specifies it, install and enable that plugin, or mark the "
            "implementation @backline.hookimpl(optionalhook=True)"
        )

    # -- adding a plugin's -----------------------------------------------------------------
    def callback(self, batch: SpecBatch) -> Callable[..., None]:
        """``register_hookspecs``' ``register(hookspecs, *, kinds=())`` for ``batch``."""

        def register(hookspecs: Namespace, *, kinds: Sequence[RegistrationKind[Any]] = ()) -> None:
            if not batch.open:
                raise RegistrationClosed(
                    f"plugin '{batch.plugin}': register_hookspecs's register() was called "
                    "after the hook returned; register everything while the hook runs"
                )
            self._check(batch, hookspecs, list(kinds))

        register.__name__ = "register"
        register.__doc__ = _hookspecs.register_hookspecs.__doc__
        return register

    def _check(
        self, batch: SpecBatch, hookspecs: Namespace, kinds: list[RegistrationKind[Any]]
    ) -> None:
        if not isinstance(hookspecs, (ModuleType, type)):
            raise TypeError(
                "register_hookspecs: expected a module or a class of hookspecs, "
                f"got {type(hookspecs).__name__}"
            )
        names = _spec_names(self._pm, hookspecs)
        if not names:
            raise ValueError(
                f"register_hookspecs: {hookspecs!r} has no function marked "
                "@backline.plugins.hookspec"
            )
        for name in names:
            first = self._owners.get(name) or (batch.plugin if name in batch.names else None)
            if first is None and self.specified(name):
                first = RESERVED_OWNER  # specified through pluggy_manager directly
            if first is not None:
                raise ClashError(Clash("hook", name, first, batch.plugin))
        for kind in kinds:
            if not isinstance(kind, RegistrationKind):
                raise TypeError(
                    "register_hookspecs: kinds must be RegistrationKind objects, "
                    f"got {type(kind).__name__}"
                )
            if kind.hook not in names:
                raise ValueError(
                    f"register_hookspecs: kind '{kind.name}' names hook '{kind.hook}', which "
                    f"{hookspecs!r} does not specify"
                )
            params = list(inspect.signature(getattr(hookspecs, kind.hook)).parameters)
            if params != ["register"]:
                raise ValueError(
                    f"register_hookspecs: a registration hook takes one argument, "
                    f"'register'; '{kind.hook}' takes {params}"
                )
            if any(k.hook == kind.hook for k in batch.kinds):
                raise ValueError(f"register_hookspecs: two kinds for hook '{kind.hook}'")
            self._check_unique(batch, kind)
            batch.kinds.append(kind)
        batch.namespaces.append(hookspecs)
        batch.names.extend(names)

    def _check_unique(self, batch: SpecBatch, kind: RegistrationKind[Any]) -> None:
        """A kind's name and key are unique (the JSON record's own keys are reserved)."""
        for what, value, reserved in (
            ("name", kind.name, frozenset(KIND_LABELS)),
            ("key", kind.key, RESERVED_KEYS),
        ):
            owners = [o for k, o in self._kinds.values() if getattr(k, what) == value]
            owners += [batch.plugin for k in batch.kinds if getattr(k, what) == value]
            if value in reserved:
                owners.insert(0, RESERVED_OWNER)
            if owners:
                raise ClashError(Clash("kind", value, owners[0], batch.plugin))

    def holders(self, batch: SpecBatch) -> list[object]:
        """Registered plugins implementing a hook of ``batch`` (waiting for its spec)."""
        found: list[object] = []
        for name in batch.names:
            caller: pluggy.HookCaller | None = getattr(self._pm.hook, name, None)
            for impl in caller.get_hookimpls() if caller is not None else ():
                if impl.plugin not in found:
                    found.append(impl.plugin)
        return found

    def incompatibility(self, batch: SpecBatch, plugin: object, name: str) -> str | None:
        """Why ``plugin``'s implementations do not fit ``batch``'s specs, or None.

        Checked in a scratch pluggy manager, so a bad implementation fails its own
        plugin, not the one that adds the specs (``add_hookspecs`` would raise midway).
        """
        scratch = pluggy.PluginManager(PROJECT_NAME)
        for namespace in batch.namespaces:
            scratch.add_hookspecs(namespace)
        try:
            scratch.register(plugin, name=name)
        except BaseException as e:  # a plugin's attribute may raise anything
            return " ".join(str(e).split()) or type(e).__name__
        return None

    def add(self, batch: SpecBatch) -> None:
        """Add ``batch`` (its implementations already checked with ``incompatibility``)."""
        for namespace in batch.namespaces:
            self._pm.add_hookspecs(namespace)
        for name in batch.names:
            self._owners[name] = batch.plugin
        for kind in batch.kinds:
            self._kinds[kind.name] = (kind, batch.plugin)


def _spec_names(pm: pluggy.PluginManager, namespace: Namespace) -> list[str]:
    return [n for n in dir(namespace) if pm.parse_hookspec_opts(namespace, n) is not None]


def unknown_hooks(callers: Iterable[pluggy.HookCaller], plugin: object) -> list[str]:
    """The hooks ``plugin`` implements that nobody specifies (``optionalhook`` ones aside)."""
    return sorted(
        caller.name
        for caller in callers
        if not caller.has_spec()
        and not all(impl.optionalhook for impl in caller.get_hookimpls() if impl.plugin is plugin)
    )
