"""The plugin manager: configuration, loading, what is registered, session observers.

Each plugin loads on its own: an import error (any ``BaseException``, even
``SystemExit``), an import or a registration hook that does not finish within
``Limits.plugin_load_timeout``, a hook validation error, a registration hook that
raises, or a clash marks that plugin ``failed`` (with its error) and undoes
whatever it had registered; the others load. What a plugin prints while loading
is kept off stdout and reported with it (``_isolation``). Strict mode
(``BACKLINE_STRICT_PLUGINS=1``) turns failures into a ``PluginError``.

Which plugins exist is ``_discovery``'s job, installing them ``_loading``'s, the
hooks plugins add ``_specs``'; this module puts them together.
"""

from __future__ import annotations

import inspect
import logging
import os
from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import pluggy

from ..limits import DEFAULT_LIMITS, Limits
from ..voice.observers import (
    add_session_observer,
    has_session_observer,
    remove_session_observer,
)
from ._core_kinds import BACKGROUNDS, LLMS, OPTIONS, TOOLS, LLMEntry
from ._discovery import (
    ENV_ALLOW,
    ENV_DENY,
    ENV_LOAD_TIMEOUT,
    ENV_STRICT,
    Candidate,
    Selection,
    builtin_candidates,
    entry_point_candidates,
    parse_name_list,
)
from ._errors import PluginError, UnknownNameError, closest, reject_awaitables
from ._hookspecs import OBSERVER_HOOKS
from ._info import PluginInfo
from ._isolation import Isolation
from ._kinds import RegistrationKind
from ._loading import Loader
from ._options import OptionEntry
from ._registry import Clash
from ._speech_kinds import KIND_TITLES, SPEECH_KIND_OF, SpeechEngineEntry, best_local

if TYPE_CHECKING:
    from ..background.definition import BackgroundDefinition
    from ..llm.llm import LLM
    from ..llm.tools import FunctionTool

T = TypeVar("T")

logger = logging.getLogger("backline.plugins")

_TRUE = {"1", "true", "yes", "on"}


class PluginManager:
    """Loads backline plugins and holds what they registered.

    ``PluginManager.from_environment().load()`` finds the built-in plugins and
    every entry point in the ``backline`` group, honouring ``BACKLINE_PLUGINS``
    (allow list; empty means none), ``BACKLINE_DISABLE_PLUGINS`` (deny list) and
    ``BACKLINE_STRICT_PLUGINS``. ``register(plugin)`` adds a plugin object by hand
    (tests, applications). Look-ups: ``background(id)``, ``tools()``, ``llm(name)``
    and friends, and ``item(kind, name)`` for kinds plugins added; an unknown name
    raises ``UnknownNameError`` listing what exists.
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
        self._builtins = builtins
        self._entry_points = entry_points
        self._selection = Selection(allow, deny)
        self.strict = strict
        self._isolation = Isolation(
            seconds=limits.plugin_load_timeout, output_chars=limits.max_plugin_output_chars
        )
        self._loader = Loader(self._isolation)
        self._loaded = False
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

    # -- the pluggy side ------------------------------------------------------------------
    @property
    def hook(self) -> pluggy.HookRelay:
        """pluggy's hook relay: ``manager.hook.session_started(session=...)`` calls all."""
        return self._loader.pm.hook

    @property
    def pluggy_manager(self) -> pluggy.PluginManager:
        return self._loader.pm

    @property
    def clashes(self) -> list[Clash]:
        """Every clash so far (the refused plugin is ``second``)."""
        return self._loader.clashes

    # -- loading ----------------------------------------------------------------------------
    def load(self) -> PluginManager:
        """Load the built-in plugins and the installed ones (once; later calls do nothing).

        Every plugin is imported and its hookspecs added before any registration
        hook runs, so load order does not matter for hooks plugins specify. Then
        plugins still waiting for a hook nobody specifies fail (``check_pending``).
        Raises ``PluginError`` in strict mode if any plugin failed.
        """
        if self._loaded:
            return self
        self._loaded = True
        candidates = builtin_candidates() if self._builtins else []
        if self._entry_points:
            candidates += entry_point_candidates(self._warn)
        for warning in self._selection.warnings(candidates):
            self._warn(warning)
        loader = self._loader
        loader.failures.clear()
        with self._isolation.stdout():
            imported = [found for c in candidates if (found := self._import(c)) is not None]
            added = [(info, plugin) for info, plugin in imported if loader.add(info, plugin)]
            for info, plugin in added:
                if info.status == "loaded":
                    loader.install(info, plugin, refuse_unknown=True)
            loader.check_pending()
        failed = list(loader.failures)
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
        A hook that no plugin specifies yet does not fail it: it waits for a plugin
        that specifies the hook (``info.waiting``; see ``check_pending``).
        """
        plugin_name = name or getattr(plugin, "__name__", None) or type(plugin).__name__
        loader = self._loader
        info = loader.new_info(
            name=plugin_name,
            distribution=distribution,
            version=version,
            module=getattr(plugin, "__name__", None) if inspect.ismodule(plugin) else None,
        )
        loader.failures.clear()
        if loader.claim(info):
            with self._isolation.stdout():
                if loader.add(info, plugin):
                    loader.install(info, plugin, refuse_unknown=False)
        self._raise_if_strict(info)
        return info

    def check_pending(self) -> None:
        """Fail every plugin still waiting for a hook that no plugin specifies (with the
        ``unknown hook`` error). ``load()`` calls it; call it after registering plugins
        by hand. In strict mode a failure raises ``PluginError``."""
        self._loader.failures.clear()
        self._loader.check_pending()
        self._raise_if_strict(None)

    def unregister(self, name: str) -> None:
        """Remove a plugin and everything it registered (commands stay in the CLI group;
        hooks it specified stay specified)."""
        self._loader.remove(name)

    def _import(self, candidate: Candidate) -> tuple[PluginInfo, object] | None:
        info = self._loader.new_info(
            name=candidate.name,
            distribution=candidate.distribution,
            version=candidate.version,
            module=candidate.module,
            builtin=candidate.builtin,
        )
        info.disabled_by = self._selection.disabled_by(candidate)
        if info.disabled_by is not None:
            info.status = "disabled"
            self._loader.infos.append(info)
            return None
        if not self._loader.claim(info):
            return None
        plugin = self._loader.load_module(info, candidate)
        return None if plugin is None else (info, plugin)

    def _raise_if_strict(self, info: PluginInfo | None) -> None:
        failed = list(self._loader.failures)
        if not self.strict or not failed:
            return
        first = info if info in failed else failed[0]
        assert first is not None
        raise PluginError(f"plugin '{first.name}' failed: {first.error}") from first.exception

    def _warn(self, message: str) -> None:
        self.warnings.append(message)
        logger.warning("%s", message)

    # -- commands ---------------------------------------------------------------------------
    def register_commands(self, cli: Any) -> None:
        """Call every loaded plugin's ``register_commands(cli)`` (once per manager).

        ``cli`` is the root ``click.Group``. A plugin whose hook raises, or that
        replaces an existing command, fails as a whole and its commands are removed.
        """
        self._loader.failures.clear()
        self._loader.register_commands(cli)
        self._raise_if_strict(None)

    # -- what is loaded -----------------------------------------------------------------------
    def plugins(self, *, include_builtin: bool = True) -> list[PluginInfo]:
        """Every plugin seen (loaded, failed, disabled): built-ins first, then by name."""
        return [i for i in self._loader.infos if include_builtin or not i.builtin]

    def plugin(self, name: str) -> PluginInfo:
        for info in self._loader.infos:
            if info.name == name:
                return info
        names = [i.name for i in self._loader.infos]
        raise UnknownNameError(self._unknown("plugin", name, names))

    @property
    def failed(self) -> list[PluginInfo]:
        return [i for i in self._loader.infos if i.status == "failed"]

    # -- the registry: any kind ---------------------------------------------------------------
    def kinds(self) -> list[RegistrationKind[Any]]:
        """Every registration kind: backline's, then those plugins added."""
        return self._loader.specs.kinds()

    def names(self, kind: RegistrationKind[Any]) -> list[str]:
        """The names registered of ``kind``, sorted."""
        return sorted(self._loader.registry.items(kind))

    def items(self, kind: RegistrationKind[T]) -> list[T]:
        """What was registered of ``kind``, by name."""
        table = self._loader.registry.items(kind)
        return [table[n] for n in sorted(table)]

    def item(self, kind: RegistrationKind[T], name: str) -> T:
        """The item of ``kind`` registered as ``name`` (``UnknownNameError`` if none)."""
        table = self._loader.registry.items(kind)
        if name not in table:
            raise UnknownNameError(self._unknown(kind.label, name, sorted(table)))
        return table[name]

    def owner(self, kind: str, name: str) -> str | None:
        """The plugin that registered ``name`` (kind: ``background``, ``tool``, ``llm``,
        ``command``, ``option``, or a kind's name a plugin added)."""
        return self._loader.registry.owner(kind, name)

    # -- the registry: backline's kinds -------------------------------------------------------
    def background_ids(self) -> list[str]:
        return self.names(BACKGROUNDS)

    def background(self, background_id: str) -> BackgroundDefinition:
        """The definition registered as ``background_id``."""
        found = self._loader.registry.items(BACKGROUNDS).get(background_id)
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
        return self.names(TOOLS)

    def tool(self, name: str) -> FunctionTool:
        found = self._loader.registry.items(TOOLS).get(name)
        if found is None:
            raise UnknownNameError(self._unknown("tool", name, self.tool_names()))
        return found

    def tools(self, names: Iterable[str] | None = None) -> list[FunctionTool]:
        """The tools named by ``names``, or all of them, sorted by name."""
        chosen = self.tool_names() if names is None else list(names)
        return [self.tool(n) for n in chosen]

    def llm_names(self) -> list[str]:
        return self.names(LLMS)

    def llms(self) -> list[LLMEntry]:
        """Every registered LLM factory (name, factory, description, plugin), by name."""
        return self.items(LLMS)

    def llm_speaks(self, name: str) -> bool:
        """Whether the LLM registered as ``name`` hears and speaks itself (``speaks``)."""
        entry = self._loader.registry.items(LLMS).get(name)
        return entry is not None and entry.speaks

    def llm(self, name: str, **options: Any) -> LLM:
        """Build the LLM registered as ``name``: ``factory(**options)``."""
        entry = self._loader.registry.items(LLMS).get(name)
        if entry is None:
            raise UnknownNameError(self._unknown("LLM", name, self.llm_names()))
        return entry.factory(**options)

    def speech_engines(self, kind: str) -> list[SpeechEngineEntry]:
        """The engines of ``kind`` (``stt``, ``tts`` or ``vad``), by name."""
        return self.items(_speech_kind(kind))

    def speech_engine(self, kind: str, name: str | None = None) -> SpeechEngineEntry:
        """The engine of ``kind`` registered as ``name``; with no name, the best local
        engine that is ready (``PluginError`` saying what to install when none is)."""
        if name is not None:
            return self.item(_speech_kind(kind), name)
        found = best_local(self.speech_engines(kind))
        if found is None:
            title = KIND_TITLES[kind]
            listed = ", ".join(
                f"{e.name} ({e.why_unavailable() or 'its model is not downloaded'})"
                for e in self.speech_engines(kind)
            )
            raise PluginError(
                f"no {title} engine is ready on this machine"
                + (f": {listed}" if listed else "")
                + "; pip install backline-local-speech, or name one (backline speech list)"
            )
        return found

    def options(self) -> list[OptionEntry]:
        """Every front-end option plugins registered (``register_options``), by flag."""
        return self.items(OPTIONS)

    def _unknown(self, what: str, name: str, available: list[str]) -> str:
        text = f"unknown {what} '{name}'; available: {', '.join(available) or 'none'}"
        suggestion = closest(name, available)
        if suggestion is not None:
            return f"{text}. Did you mean '{suggestion}'?"
        missing = [i for i in self._loader.infos if i.status != "loaded"]
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

    # -- session observers --------------------------------------------------------------------
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
        for name, plugin in list(self._loader.objects.items()):
            try:
                results = self._loader.caller_for(plugin, hook)(session=session)
                reject_awaitables(hook, results)
            except Exception:
                logger.exception("plugin '%s': its %s observer raised", name, hook)


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


def _speech_kind(kind: str) -> RegistrationKind[SpeechEngineEntry]:
    found = SPEECH_KIND_OF.get(kind)
    if found is None:
        raise ValueError(f"speech engine kind must be stt, tts or vad, got {kind!r}")
    return found
