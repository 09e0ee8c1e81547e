"""The plugin manager: discovery with isolation, selection, the registry, observers.

Each plugin loads on its own: an import error (any ``BaseException``, even
``SystemExit``), an import or a registration hook that does not finish within
``Limits.plugin_load_timeout``, a hook validation error, a registration hook that
raises, or a clash marks that plugin ``failed`` (with its error) and undoes
whatever it had registered; the others load. What a plugin prints while loading
is kept off stdout and reported with it (``_isolation``). Strict mode
(``BACKLINE_STRICT_PLUGINS=1``) turns failures into a ``PluginError``.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import inspect
import logging
import os
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pluggy

from ..limits import DEFAULT_LIMITS, Limits
from ..voice.observers import (
    add_session_observer,
    has_session_observer,
    remove_session_observer,
)
from . import _hookspecs
from ._hookspecs import OBSERVER_HOOKS, PROJECT_NAME, REGISTRATION_HOOKS
from ._isolation import Isolation, Outcome, PluginTimeout
from ._options import OptionEntry
from ._registry import (
    RESERVED_OWNER,
    Clash,
    ClashError,
    Kind,
    LLMEntry,
    PluginInfo,
    Registry,
    Staged,
)

if TYPE_CHECKING:
    from ..background.definition import BackgroundDefinition
    from ..llm.llm import LLM
    from ..llm.tools import FunctionTool
    from ._search import SearchProvider, SearchProviderEntry

logger = logging.getLogger("backline.plugins")

ENTRY_POINT_GROUP = PROJECT_NAME
ENV_ALLOW = "BACKLINE_PLUGINS"
ENV_DENY = "BACKLINE_DISABLE_PLUGINS"
ENV_STRICT = "BACKLINE_STRICT_PLUGINS"
ENV_LOAD_TIMEOUT = "BACKLINE_PLUGIN_LOAD_TIMEOUT"

BUILTIN_PLUGINS: tuple[tuple[str, str], ...] = (("anthropic", "backline.plugins._builtin"),)
"""Built-in plugins, ``(name, module)``: registered exactly like installed ones."""

_TRUE = {"1", "true", "yes", "on"}


class PluginError(Exception):
    """Plugins failed to load in strict mode, or a plugin could not be registered."""


class UnknownNameError(LookupError):
    """No loaded plugin registered that name (the message lists the available ones)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def normalize_name(name: str) -> str:
    """Plugin and distribution names compare case-insensitively, ``-`` = ``_`` = ``.``."""
    return re.sub(r"[-_.]+", "-", name).strip().lower()


def parse_name_list(value: str | None) -> frozenset[str] | None:
    """``"a, b"`` -> ``{"a", "b"}``; ``None`` stays ``None`` (unset), ``""`` is empty."""
    if value is None:
        return None
    return frozenset(normalize_name(n) for n in value.split(",") if n.strip())


@dataclass(frozen=True)
class _Candidate:
    name: str
    module: str
    load: Callable[[], object]
    distribution: str | None
    version: str | None
    builtin: bool


class PluginManager:
    """Loads backline plugins and holds what they registered.

    ``PluginManager.from_environment().load()`` finds the built-in plugins and
    every entry point in the ``backline`` group, honouring ``BACKLINE_PLUGINS``
    (allow list; empty means none), ``BACKLINE_DISABLE_PLUGINS`` (deny list) and
    ``BACKLINE_STRICT_PLUGINS``. ``register(plugin)`` adds a plugin object by hand
    (tests, applications). Look-ups: ``background(id)``, ``tools()``, ``llm(name)``
    and friends; an unknown name raises ``UnknownNameError`` listing what exists.
    """

    def __init__(
        self,
        *,
        builtins: bool = True,
        entry_points: bool = True,
        allow: Collection[str] | None = None,
        deny: Collection[str] = (),
        strict: bool = False,
        limits: Limits = DEFAULT_LIMITS,
    ) -> None:
        self._pm = pluggy.PluginManager(PROJECT_NAME)
        self._pm.add_hookspecs(_hookspecs)
        self._builtins = builtins
        self._entry_points = entry_points
        self._allow = None if allow is None else frozenset(normalize_name(n) for n in allow)
        self._deny = frozenset(normalize_name(n) for n in deny)
        self.strict = strict
        self._isolation = Isolation(
            seconds=limits.plugin_load_timeout, output_chars=limits.max_plugin_output_chars
        )
        self._infos: list[PluginInfo] = []
        self._printed: dict[str, tuple[str, int]] = {}  # name -> (kept, total chars)
        self._objects: dict[str, object] = {}
        self._registry = Registry()
        self._loaded = False
        self._cli: Any = None
        self.clashes: list[Clash] = []
        self.warnings: list[str] = []

    @classmethod
    def from_environment(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        builtins: bool = True,
        entry_points: bool = True,
    ) -> PluginManager:
        """A manager configured from ``BACKLINE_PLUGINS``, ``BACKLINE_DISABLE_PLUGINS``,
        ``BACKLINE_STRICT_PLUGINS`` and ``BACKLINE_PLUGIN_LOAD_TIMEOUT`` (not loaded
        yet: call ``load()``)."""
        env = os.environ if environ is None else environ
        limits, problem = _limits_from(env.get(ENV_LOAD_TIMEOUT))
        manager = cls(
            builtins=builtins,
            entry_points=entry_points,
            allow=parse_name_list(env.get(ENV_ALLOW)),
            deny=parse_name_list(env.get(ENV_DENY)) or (),
            strict=env.get(ENV_STRICT, "").strip().lower() in _TRUE,
            limits=limits,
        )
        if problem:
            manager._warn(problem)
        return manager

    # -- the pluggy side ------------------------------------------------------------
    @property
    def hook(self) -> pluggy.HookRelay:
        """pluggy's hook relay: ``manager.hook.session_started(session=...)`` calls all."""
        return self._pm.hook

    @property
    def pluggy_manager(self) -> pluggy.PluginManager:
        return self._pm

    # -- loading ----------------------------------------------------------------------
    def load(self) -> PluginManager:
        """Load the built-in plugins and the installed ones (once; later calls do nothing).

        Raises ``PluginError`` in strict mode if any plugin failed.
        """
        if self._loaded:
            return self
        self._loaded = True
        candidates = self._builtin_candidates() if self._builtins else []
        if self._entry_points:
            candidates += _entry_point_candidates(self._warn)
        self._check_selection(candidates)
        before = len(self._infos)
        with self._isolation.stdout():
            for candidate in candidates:
                self._load_candidate(candidate)
        failed = [i for i in self._infos[before:] if i.status == "failed"]
        if self.strict and failed:
            lines = "\n".join(f"  - {i.name}: {i.error}" for i in failed)
            raise PluginError(
                f"{len(failed)} plugin(s) failed to load ({ENV_STRICT}=1):\n{lines}"
            ) from failed[0].exception
        return self

    def register(
        self,
        plugin: object,
        name: str | None = None,
        *,
        distribution: str | None = None,
        version: str | None = None,
    ) -> PluginInfo:
        """Register a plugin object (a module, a class, an instance) by hand.

        It is isolated like an installed plugin; in strict mode a failure raises
        ``PluginError`` (chained to the cause), otherwise the returned info says
        ``failed``. Selection variables do not apply to plugins registered by hand.
        """
        plugin_name = name or getattr(plugin, "__name__", None) or type(plugin).__name__
        info = PluginInfo(
            name=plugin_name,
            distribution=distribution,
            version=version,
            module=getattr(plugin, "__name__", None) if inspect.ismodule(plugin) else None,
        )
        if self._claim_name(info):
            with self._isolation.stdout():
                self._install(info, plugin)
        if self.strict and info.status == "failed":
            raise PluginError(f"plugin '{info.name}' failed: {info.error}") from info.exception
        return info

    def unregister(self, name: str) -> None:
        """Remove a plugin and everything it registered (commands stay in the CLI group)."""
        obj = self._objects.pop(name, None)
        if obj is not None:
            self._pm.unregister(obj)
        self._registry.remove(name)
        self._infos = [i for i in self._infos if i.name != name]

    def _builtin_candidates(self) -> list[_Candidate]:
        from .. import __version__

        return [
            _Candidate(
                name=name,
                module=module,
                load=functools.partial(importlib.import_module, module),
                distribution="backline",
                version=__version__,
                builtin=True,
            )
            for name, module in BUILTIN_PLUGINS
        ]

    def _disabled_by(self, candidate: _Candidate) -> str | None:
        """The variable that disables ``candidate``, or None if it is selected."""
        keys = {normalize_name(candidate.name)}
        if candidate.distribution:
            keys.add(normalize_name(candidate.distribution))
        if self._allow is not None and not keys & self._allow:
            return ENV_ALLOW
        return ENV_DENY if keys & self._deny else None

    def _check_selection(self, candidates: list[_Candidate]) -> None:
        known = {normalize_name(c.name) for c in candidates}
        known |= {normalize_name(c.distribution) for c in candidates if c.distribution}
        for env, names in ((ENV_ALLOW, self._allow or frozenset()), (ENV_DENY, self._deny)):
            for name in sorted(names - known):
                self._warn(f"{env} names '{name}', but no plugin of that name is installed")
        for candidate in candidates:
            by = self._disabled_by(candidate) if candidate.builtin else None
            if by is not None:
                self._warn(_builtin_disabled(candidate.name, by))

    def _warn(self, message: str) -> None:
        self.warnings.append(message)
        logger.warning("%s", message)

    def _load_candidate(self, candidate: _Candidate) -> None:
        info = PluginInfo(
            name=candidate.name,
            distribution=candidate.distribution,
            version=candidate.version,
            module=candidate.module,
            builtin=candidate.builtin,
        )
        info.disabled_by = self._disabled_by(candidate)
        if info.disabled_by is not None:
            info.status = "disabled"
            self._infos.append(info)
            return
        if not self._claim_name(info):
            return
        outcome = self._isolation.run(candidate.load, what=f"importing {candidate.module}")
        self._note_printed(info, outcome)
        if outcome.error is not None:
            self._fail(info, outcome.error, _describe(outcome.error))
            return
        self._install(info, outcome.value)

    def _claim_name(self, info: PluginInfo) -> bool:
        """Record ``info``; False (and failed) if a loaded plugin already has its name."""
        holder = next(
            (i for i in self._infos if i.name == info.name and i.status == "loaded"), None
        )
        self._infos.append(info)
        if holder is None:
            return True
        clash = Clash("plugin", info.name, _label(holder), _label(info))
        self.clashes.append(clash)
        self._fail(info, ClashError(clash), clash.message)
        return False

    def _install(self, info: PluginInfo, plugin: object) -> None:
        """Register ``plugin`` with pluggy and run its registration hooks, all or nothing."""
        try:
            self._pm.register(plugin, name=info.name)
        except BaseException as e:  # a plugin's attribute may raise anything
            self._fail(info, e, " ".join(_describe(e).split()))
            return
        staged = Staged(info.name)
        try:
            callers = self._pm.get_hookcallers(plugin) or []
            _check_known(info.name, plugin, callers)
            info.hooks = sorted(h.name for h in callers)
            for hook in REGISTRATION_HOOKS:
                if hook in info.hooks:
                    self._call_registration(info, plugin, hook, staged)
            self._registry.check(staged)
        except ClashError as e:
            self._pm.unregister(plugin)
            self.clashes.append(e.clash)
            self._fail(info, e, e.clash.message)
            return
        except Exception as e:
            self._pm.unregister(plugin)
            self._fail(info, e.error if isinstance(e, _HookFailed) else e, _describe(e))
            return
        self._registry.commit(staged)
        self._objects[info.name] = plugin
        info.backgrounds = sorted(staged.backgrounds)
        info.tools = sorted(staged.tools)
        info.llms = sorted(staged.llms)
        info.options = sorted(staged.options)
        info.search_providers = sorted(staged.search_providers)
        if self._cli is not None and "register_commands" in info.hooks:
            self._register_commands_of(info, self._cli)

    def _call_registration(
        self, info: PluginInfo, plugin: object, hook: str, staged: Staged
    ) -> None:
        caller = self._caller_for(plugin, hook)
        register = staged.callback(hook)
        staged.open(hook)
        try:  # isolated: a hook that hangs or raises SystemExit fails this plugin only
            outcome = self._isolation.run(
                lambda: caller(register=register), what=f"its {hook} hook"
            )
        finally:
            staged.open(None)  # a hook still running after its bound can register nothing
        self._note_printed(info, outcome)
        if isinstance(outcome.error, ClashError):
            raise outcome.error
        if isinstance(outcome.error, PluginTimeout):
            raise _HookFailed(hook, outcome.error, timed_out=True)
        if outcome.error is not None:
            raise _HookFailed(hook, outcome.error) from outcome.error
        _reject_awaitables(hook, outcome.value or [])

    def _note_printed(self, info: PluginInfo, outcome: Outcome[Any]) -> None:
        """Keep what a plugin printed while loading (off stdout) and say so on stderr."""
        if not outcome.printed_chars:
            return
        kept, total = self._printed.get(info.name, ("", 0))
        kept = (kept + outcome.printed)[: self._isolation.output_chars]
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

    def _caller_for(self, plugin: object, hook: str) -> Callable[..., list[Any]]:
        others = [p for p in self._pm.get_plugins() if p is not plugin]
        caller: Callable[..., list[Any]] = self._pm.subset_hook_caller(hook, others)
        return caller

    def _fail(self, info: PluginInfo, error: BaseException, text: str) -> None:
        info.status = "failed"
        info.error = text
        info.exception = error
        info.backgrounds, info.tools, info.llms, info.commands = [], [], [], []
        info.options, info.search_providers = [], []
        logger.warning("plugin '%s' failed to load: %s", info.name, text)

    # -- commands -----------------------------------------------------------------------
    def register_commands(self, cli: Any) -> None:
        """Call every loaded plugin's ``register_commands(cli)`` (once per manager).

        ``cli`` is the root ``click.Group``. A plugin whose hook raises, or that
        replaces an existing command, fails as a whole and its commands are removed.
        """
        if self._cli is not None:
            return
        self._cli = cli
        for info in list(self._infos):
            if info.status == "loaded" and "register_commands" in info.hooks:
                self._register_commands_of(info, cli)

    def _register_commands_of(self, info: PluginInfo, cli: Any) -> None:
        plugin = self._objects[info.name]
        commands: dict[str, Any] = cli.commands
        before = dict(commands)
        try:
            _reject_awaitables(
                "register_commands", self._caller_for(plugin, "register_commands")(cli=cli)
            )
            replaced = sorted(n for n, c in before.items() if commands.get(n) is not c)
            if replaced:
                first = self._registry.commands.get(replaced[0], RESERVED_OWNER)
                raise ClashError(Clash("command", replaced[0], first, info.name))
        except BaseException as e:  # even SystemExit fails this plugin only
            commands.clear()
            commands.update(before)
            self._pm.unregister(plugin)
            self._objects.pop(info.name, None)
            self._registry.remove(info.name)
            if isinstance(e, ClashError):
                self.clashes.append(e.clash)
                self._fail(info, e, e.clash.message)
            else:
                self._fail(info, e, _describe(_HookFailed("register_commands", e)))
            if self.strict:
                raise PluginError(f"plugin '{info.name}' failed: {info.error}") from e
            return
        info.commands = sorted(n for n in commands if n not in before)
        for name in info.commands:
            self._registry.add_command(name, info.name)

    # -- what is loaded -------------------------------------------------------------------
    def plugins(self, *, include_builtin: bool = True) -> list[PluginInfo]:
        """Every plugin seen (loaded, failed, disabled): built-ins first, then by name."""
        return [i for i in self._infos if include_builtin or not i.builtin]

    def plugin(self, name: str) -> PluginInfo:
        for info in self._infos:
            if info.name == name:
                return info
        raise UnknownNameError(self._unknown("plugin", name, [i.name for i in self._infos]))

    @property
    def failed(self) -> list[PluginInfo]:
        return [i for i in self._infos if i.status == "failed"]

    # -- the registry ------------------------------------------------------------------------
    def background_ids(self) -> list[str]:
        return sorted(self._registry.backgrounds)

    def background(self, background_id: str) -> BackgroundDefinition:
        """The definition registered as ``background_id``."""
        found = self._registry.backgrounds.get(background_id)
        if found is None:
            raise UnknownNameError(
                self._unknown("background session", background_id, self.background_ids())
            )
        return found

    def background_definitions(
        self, ids: Iterable[str] | None = None
    ) -> list[BackgroundDefinition]:
        """The definitions named by ``ids`` (in that order), or all of them, sorted by id."""
        chosen = self.background_ids() if ids is None else list(ids)
        return [self.background(i) for i in chosen]

    def tool_names(self) -> list[str]:
        return sorted(self._registry.tools)

    def tool(self, name: str) -> FunctionTool:
        found = self._registry.tools.get(name)
        if found is None:
            raise UnknownNameError(self._unknown("tool", name, self.tool_names()))
        return found

    def tools(self, names: Iterable[str] | None = None) -> list[FunctionTool]:
        """The tools named by ``names``, or all of them, sorted by name."""
        chosen = self.tool_names() if names is None else list(names)
        return [self.tool(n) for n in chosen]

    def llm_names(self) -> list[str]:
        return sorted(self._registry.llms)

    def llms(self) -> list[LLMEntry]:
        """Every registered LLM factory (name, factory, description, plugin), by name."""
        return [self._registry.llms[n] for n in self.llm_names()]

    def llm(self, name: str, **options: Any) -> LLM:
        """Build the LLM registered as ``name``: ``factory(**options)``."""
        entry = self._registry.llms.get(name)
        if entry is None:
            raise UnknownNameError(self._unknown("LLM", name, self.llm_names()))
        return entry.factory(**options)

    def options(self) -> list[OptionEntry]:
        """Every front-end option plugins registered (``register_options``), by flag."""
        return [self._registry.options[f] for f in sorted(self._registry.options)]

    def search_provider_names(self) -> list[str]:
        return sorted(self._registry.search_providers)

    def search_providers(self) -> list[SearchProviderEntry]:
        """Every registered search provider (name, factory, description, plugin), by name."""
        return [self._registry.search_providers[n] for n in self.search_provider_names()]

    def search_provider(self, name: str, **options: Any) -> SearchProvider:
        """Build the search provider registered as ``name``: ``factory(**options)``."""
        entry = self._registry.search_providers.get(name)
        if entry is None:
            raise UnknownNameError(
                self._unknown("search provider", name, self.search_provider_names())
            )
        return entry.factory(**options)

    def owner(self, kind: Kind, name: str) -> str | None:
        """The plugin that registered ``name`` (kind: background, tool, llm, command,
        option, search_provider)."""
        return self._registry.owner(kind, name)

    def _unknown(self, what: str, name: str, available: list[str]) -> str:
        text = f"unknown {what} '{name}'; available: {', '.join(available) or 'none'}"
        missing = [i for i in self._infos if i.status != "loaded"]
        if missing:
            listed = ", ".join(
                f"{i.name} ({'failed' if i.status == 'failed' else i.status_text})" for i in missing
            )
            hint = (
                "`backline plugins --all`"
                if any(i.builtin for i in missing)
                else "`backline plugins`"
            )
            return f"{text}. Plugins not loaded: {listed}; {hint} says why"
        return f"{text}. Install a plugin that provides it: `backline install PACKAGE`"

    # -- session observers ------------------------------------------------------------------
    def activate(self) -> None:
        """Forward every session's start and close to this manager's observer hooks."""
        add_session_observer(self._observe)

    def deactivate(self) -> None:
        remove_session_observer(self._observe)

    @property
    def active(self) -> bool:
        return has_session_observer(self._observe)

    def _observe(self, hook: str, session: Any) -> None:
        if hook not in OBSERVER_HOOKS:
            return
        for name, plugin in list(self._objects.items()):
            try:
                results = self._caller_for(plugin, hook)(session=session)
                _reject_awaitables(hook, results)
            except Exception:
                logger.exception("plugin '%s': its %s observer raised", name, hook)


class _HookFailed(Exception):
    def __init__(self, hook: str, error: BaseException, *, timed_out: bool = False) -> None:
        super().__init__(str(error) if timed_out else f"{hook} raised {_describe(error)}")
        self.hook = hook
        self.error = error


def _describe(error: BaseException) -> str:
    if isinstance(error, (_HookFailed, PluginTimeout)):
        return str(error)
    message = str(error)
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


def _builtin_disabled(name: str, by: str) -> str:
    what = {"anthropic": "the built-in Anthropic LLM (the default --llm)"}.get(
        name, f"the built-in plugin '{name}'"
    )
    if by == ENV_ALLOW:
        return (
            f"{ENV_ALLOW} does not name '{name}', so {what} is disabled; "
            f"add '{name}' to {ENV_ALLOW} to keep it"
        )
    return f"{ENV_DENY} names '{name}', so {what} is disabled"


def _limits_from(seconds: str | None) -> tuple[Limits, str | None]:
    """The limits with ``BACKLINE_PLUGIN_LOAD_TIMEOUT`` applied, and a warning if invalid."""
    if seconds is None or not seconds.strip():
        return DEFAULT_LIMITS, None
    try:
        return DEFAULT_LIMITS.with_(plugin_load_timeout=float(seconds)), None
    except ValueError:
        default = DEFAULT_LIMITS.plugin_load_timeout
        return DEFAULT_LIMITS, (
            f"{ENV_LOAD_TIMEOUT}={seconds!r} is not a positive number of seconds; using {default:g}"
        )


def _check_known(name: str, plugin: object, callers: list[pluggy.HookCaller]) -> None:
    """Refuse implementations of hooks that do not exist (a typo would do nothing)."""
    for caller in callers:
        if caller.has_spec():
            continue
        if all(impl.optionalhook for impl in caller.get_hookimpls() if impl.plugin is plugin):
            continue
        hooks = (*REGISTRATION_HOOKS, "register_commands", *OBSERVER_HOOKS)
        close = difflib.get_close_matches(caller.name, hooks, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else f"; hooks: {', '.join(hooks)}"
        raise pluggy.PluginValidationError(
            plugin, f"plugin '{name}' implements unknown hook '{caller.name}'{hint}"
        )


def _label(info: PluginInfo) -> str:
    return f"{info.name} ({info.distribution})" if info.distribution else info.name


def _reject_awaitables(hook: str, results: Iterable[Any]) -> None:
    for result in results:
        if inspect.isawaitable(result):
            close = getattr(result, "close", None)
            if close is not None:
                close()
            raise TypeError(f"{hook} must be a plain function (def), not async def")


def _entry_point_candidates(warn: Callable[[str], None]) -> list[_Candidate]:
    """Every ``backline`` entry point (the first distribution of a name on
    ``sys.path`` wins, as for imports). Only plugins' metadata is parsed."""
    import importlib.metadata as md

    try:
        entry_points = md.entry_points(group=ENTRY_POINT_GROUP)
    except Exception as e:
        warn(f"cannot list the installed plugins: {_describe(e)}")
        return []
    found: list[_Candidate] = []
    for ep in entry_points:
        dist_name: str | None = None
        version: str | None = None
        if ep.dist is not None:
            try:
                dist_name, version = ep.dist.metadata["Name"], ep.dist.version
            except Exception as e:
                warn(f"cannot read the metadata of plugin '{ep.name}': {_describe(e)}")
        found.append(_Candidate(ep.name, ep.value, ep.load, dist_name, version, builtin=False))
    return sorted(found, key=lambda c: (normalize_name(c.name), c.distribution or ""))
