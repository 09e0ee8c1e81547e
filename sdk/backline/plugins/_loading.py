"""Installing plugins, each all or nothing: import, hookspecs, registrations, commands.

A plugin goes through three steps. ``load_module`` imports it (isolated: bounded in
time, every exception caught). ``add`` registers it with pluggy and adds the hooks
it specifies (``register_hookspecs``). ``install`` runs its registration hooks
into a staged batch and commits the batch, or fails the plugin and undoes
everything it had registered. ``PluginManager.load()`` adds every plugin before
installing any, so a plugin may implement a hook that a plugin later in load
order specifies. A plugin registered by hand may wait for such a hook: its
registrations for it run when a plugin that specifies it is added, and
``check_pending`` fails it if none ever is.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pluggy

from ._discovery import Candidate
from ._errors import HookFailed, describe, reject_awaitables
from ._hookspecs import PROJECT_NAME
from ._info import PluginInfo
from ._isolation import Isolation, Outcome, PluginTimeout
from ._kinds import RegistrationKind
from ._registry import RESERVED_OWNER, Clash, ClashError, Registry, Staged
from ._specs import SpecBatch, Specs, unknown_hooks

logger = logging.getLogger("backline.plugins")

_SPEC_HOOK = "register_hookspecs"


class Loader:
    """The plugins of one pluggy manager: their records, their objects, their registry."""

    def __init__(self, isolation: Isolation) -> None:
        self.pm = pluggy.PluginManager(PROJECT_NAME)
        self.specs = Specs(self.pm)
        self.registry = Registry()
        self.isolation = isolation
        self.infos: list[PluginInfo] = []
        self.objects: dict[str, object] = {}  # registered with pluggy
        self.clashes: list[Clash] = []
        self.failures: list[PluginInfo] = []  # failed since the caller last cleared it
        self._installed: set[str] = set()
        self._printed: dict[str, tuple[str, int]] = {}  # name -> (kept, total chars)
        self._cli: Any = None

    # -- records ------------------------------------------------------------------------------
    def new_info(self, **fields: Any) -> PluginInfo:
        """A record with a (still empty) entry for every kind plugins added."""
        info = PluginInfo(**fields)
        for kind in self.specs.plugin_kinds():
            info.by_kind[kind.key] = []
        return info

    def claim(self, info: PluginInfo) -> bool:
        """Record ``info``; False (and failed) if a loaded plugin already has its name."""
        holder = next((i for i in self.infos if i.name == info.name and i.status == "loaded"), None)
        self.infos.append(info)
        if holder is None:
            return True
        clash = Clash("plugin", info.name, _label(holder), _label(info))
        self.clashes.append(clash)
        self._fail(info, ClashError(clash), clash.message)
        return False

    def info(self, name: str) -> PluginInfo | None:
        return next((i for i in self.infos if i.name == name and i.status == "loaded"), None)

    # -- the three steps ----------------------------------------------------------------------
    def load_module(self, info: PluginInfo, candidate: Candidate) -> object | None:
        """Import ``candidate``'s module (isolated); None if that failed."""
        outcome = self.isolation.run(candidate.load, what=f"importing {candidate.module}")
        self._note_printed(info, outcome)
        if outcome.error is not None:
            self._fail(info, outcome.error, describe(outcome.error))
            return None
        return outcome.value

    def add(self, info: PluginInfo, plugin: object) -> bool:
        """Register ``plugin`` with pluggy and add the hooks it specifies; False if it failed."""
        try:
            self.pm.register(plugin, name=info.name)
        except BaseException as e:  # a plugin's attribute may raise anything
            self._fail(info, e, " ".join(describe(e).split()))
            return False
        self.objects[info.name] = plugin
        if _SPEC_HOOK not in _implemented(self.pm, plugin):
            return True
        batch = SpecBatch(info.name)
        try:
            self._call(info, plugin, _SPEC_HOOK, self.specs.callback(batch), _gate(batch))
        except Exception as e:
            self._drop(info, e)
            return False
        return self._add_specs(info, plugin, batch)

    def install(self, info: PluginInfo, plugin: object, *, refuse_unknown: bool) -> None:
        """Run ``plugin``'s registration hooks and commit what they registered, or fail it.

        A hook nobody specifies fails the plugin if ``refuse_unknown``; otherwise the
        plugin waits for it (``info.waiting``).
        """
        callers = self.pm.get_hookcallers(plugin) or []
        info.hooks = sorted(c.name for c in callers)
        unknown = unknown_hooks(callers, plugin)
        try:
            if unknown and refuse_unknown:
                message = self.specs.unknown_hook_message(info.name, unknown[0])
                raise pluggy.PluginValidationError(plugin, message)
            kinds = [k for k in self.specs.kinds() if k.hook in info.hooks]
            self._register(info, plugin, kinds)
        except Exception as e:
            self._drop(info, e)
            return
        self._installed.add(info.name)
        info.waiting = unknown
        if self._cli is not None and "register_commands" in info.hooks:
            self._register_commands_of(info, self._cli)

    def check_pending(self) -> None:
        """Fail every installed plugin still waiting for a hook that nobody specifies."""
        for info in list(self.infos):
            if info.status == "loaded" and info.waiting:
                message = self.specs.unknown_hook_message(info.name, info.waiting[0])
                self._drop(info, pluggy.PluginValidationError(self.objects[info.name], message))

    def remove(self, name: str) -> None:
        """Forget ``name``: its pluggy registration, its registrations, its record."""
        obj = self.objects.pop(name, None)
        if obj is not None:
            self.pm.unregister(obj)
        self.registry.remove(name)
        self._installed.discard(name)
        self.infos = [i for i in self.infos if i.name != name]

    # -- hookspecs from plugins ---------------------------------------------------------------
    def _add_specs(self, info: PluginInfo, plugin: object, batch: SpecBatch) -> bool:
        holders = self.specs.holders(batch)
        if plugin in holders:
            own = self.specs.incompatibility(batch, plugin, info.name)
            if own is not None:
                self._drop(info, pluggy.PluginValidationError(plugin, own))
                return False
        waiting: list[tuple[PluginInfo, object]] = []
        for other in holders:
            name = self.pm.get_name(other)
            other_info = self.info(name) if name is not None else None
            if other is plugin or other_info is None:
                continue
            why = self.specs.incompatibility(batch, other, other_info.name)
            if why is not None:
                self._drop(other_info, pluggy.PluginValidationError(other, why))
            elif other_info.name in self._installed:
                waiting.append((other_info, other))
        self.specs.add(batch)
        for record in self.infos:
            for kind in batch.kinds:
                record.by_kind.setdefault(kind.key, [])
        for other_info, other in waiting:  # installed before these specs came
            self._catch_up(other_info, other, batch)
        return True

    def _catch_up(self, info: PluginInfo, plugin: object, batch: SpecBatch) -> None:
        info.waiting = [h for h in info.waiting if not self.specs.specified(h)]
        kinds = [k for k in batch.kinds if k.hook in info.hooks]
        try:
            self._register(info, plugin, kinds)
        except Exception as e:
            self._drop(info, e)

    # -- registration hooks -------------------------------------------------------------------
    def _register(
        self, info: PluginInfo, plugin: object, kinds: list[RegistrationKind[Any]]
    ) -> None:
        """Run ``kinds``' hooks of ``plugin`` into one batch; check and commit it."""
        staged = Staged(info.name)
        for kind in kinds:
            gate = _staged_gate(staged, kind.hook)
            self._call(info, plugin, kind.hook, staged.callback(kind), gate)
        self.registry.check(staged, kinds)
        self.registry.commit(staged)
        for kind in kinds:
            info.set_registered(kind.key, staged.names(kind))

    def _call(
        self,
        info: PluginInfo,
        plugin: object,
        hook: str,
        register: Callable[..., None],
        gate: Callable[[bool], None],
    ) -> None:
        caller = self.caller_for(plugin, hook)
        gate(True)
        try:  # isolated: a hook that hangs or raises SystemExit fails this plugin only
            outcome = self.isolation.run(lambda: caller(register=register), what=f"its {hook} hook")
        finally:
            gate(False)  # a hook still running after its bound can register nothing
        self._note_printed(info, outcome)
        if isinstance(outcome.error, ClashError):
            raise outcome.error
        if isinstance(outcome.error, PluginTimeout):
            raise HookFailed(hook, outcome.error, timed_out=True)
        if outcome.error is not None:
            raise HookFailed(hook, outcome.error) from outcome.error
        reject_awaitables(hook, outcome.value or [])

    def caller_for(self, plugin: object, hook: str) -> Callable[..., list[Any]]:
        """Call ``hook`` of ``plugin`` only."""
        others = [p for p in self.pm.get_plugins() if p is not plugin]
        caller: Callable[..., list[Any]] = self.pm.subset_hook_caller(hook, others)
        return caller

    # -- commands -----------------------------------------------------------------------------
    def register_commands(self, cli: Any) -> None:
        """Call every installed plugin's ``register_commands(cli)`` (once)."""
        if self._cli is not None:
            return
        self._cli = cli
        for info in list(self.infos):
            if info.status == "loaded" and "register_commands" in info.hooks:
                self._register_commands_of(info, cli)

    def _register_commands_of(self, info: PluginInfo, cli: Any) -> None:
        plugin = self.objects[info.name]
        commands: dict[str, Any] = cli.commands
        before = dict(commands)
        try:
            reject_awaitables(
                "register_commands", self.caller_for(plugin, "register_commands")(cli=cli)
            )
            replaced = sorted(n for n, c in before.items() if commands.get(n) is not c)
            if replaced:
                first = self.registry.commands.get(replaced[0], RESERVED_OWNER)
                raise ClashError(Clash("command", replaced[0], first, info.name))
        except BaseException as e:  # even SystemExit fails this plugin only
            commands.clear()
            commands.update(before)
            self._drop(info, e if isinstance(e, ClashError) else HookFailed("register_commands", e))
            return
        info.commands = sorted(n for n in commands if n not in before)
        for name in info.commands:
            self.registry.add_command(name, info.name)

    # -- failing ------------------------------------------------------------------------------
    def _drop(self, info: PluginInfo, error: BaseException) -> None:
        """Fail a plugin that got as far as pluggy: undo all it registered."""
        plugin = self.objects.pop(info.name, None)
        if plugin is not None and self.pm.get_name(plugin) is not None:
            self.pm.unregister(plugin)
        self.registry.remove(info.name)
        self._installed.discard(info.name)
        if isinstance(error, ClashError):
            self.clashes.append(error.clash)
            self._fail(info, error, error.clash.message)
        elif isinstance(error, HookFailed):
            self._fail(info, error.error, describe(error))
        else:
            self._fail(info, error, describe(error))

    def _fail(self, info: PluginInfo, error: BaseException, text: str) -> None:
        info.status = "failed"
        info.error = text
        info.exception = error
        info.waiting = []
        info.clear_registered()
        self.failures.append(info)
        logger.warning("plugin '%s' failed to load: %s", info.name, text)

    def _note_printed(self, info: PluginInfo, outcome: Outcome[Any]) -> None:
        """Keep what a plugin printed while loading (off stdout) and say so on stderr."""
        if not outcome.printed_chars:
            return
        kept, total = self._printed.get(info.name, ("", 0))
        kept = (kept + outcome.printed)[: self.isolation.output_chars]
        total += outcome.printed_chars
        self._printed[info.name] = (kept, total)
        info.printed = kept + (
            f"[... {total - len(kept)} more characters not kept]" if total > len(kept) else ""
        )
        logger.warning(
            "plugin '%s' printed while loading (kept off stdout): %s",
            info.name,
            " ".join(outcome.printed.split()),
        )


def _implemented(pm: pluggy.PluginManager, plugin: object) -> set[str]:
    return {c.name for c in pm.get_hookcallers(plugin) or []}


def _gate(batch: SpecBatch) -> Callable[[bool], None]:
    def gate(is_open: bool) -> None:
        batch.open = is_open

    return gate


def _staged_gate(staged: Staged, hook: str) -> Callable[[bool], None]:
    def gate(is_open: bool) -> None:
        staged.open(hook if is_open else None)

    return gate


def _label(info: PluginInfo) -> str:
    return f"{info.name} ({info.distribution})" if info.distribution else info.name
