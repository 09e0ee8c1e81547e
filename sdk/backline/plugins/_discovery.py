"""Which plugins exist and which are selected: built-ins, entry points, the allow and deny lists.

Nothing here imports a plugin: a ``Candidate`` knows how to load one, and the
``Selection`` says whether it may be loaded (a disabled plugin is never imported).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass

from ._errors import describe
from ._hookspecs import PROJECT_NAME

ENTRY_POINT_GROUP = PROJECT_NAME
ENV_ALLOW = "BACKLINE_PLUGINS"
ENV_DENY = "BACKLINE_DISABLE_PLUGINS"
ENV_STRICT = "BACKLINE_STRICT_PLUGINS"
ENV_LOAD_TIMEOUT = "BACKLINE_PLUGIN_LOAD_TIMEOUT"

BUILTIN_PLUGINS: tuple[tuple[str, str], ...] = (
    ("anthropic", "backline.plugins._builtin"),
    ("speech", "backline.plugins._builtin_speech"),
)
"""Built-in plugins, ``(name, module)``: registered exactly like installed ones."""


def normalize_name(name: str) -> str:
    """Plugin and distribution names compare case-insensitively, ``-`` = ``_`` = ``.``."""
    return re.sub(r"[-_.]+", "-", name).strip().lower()


def parse_name_list(value: str | None) -> frozenset[str] | None:
    """``"a, b"`` -> ``{"a", "b"}``; ``None`` stays ``None`` (unset), ``""`` is empty."""
    if value is None:
        return None
    return frozenset(normalize_name(n) for n in value.split(",") if n.strip())


@dataclass(frozen=True)
class Candidate:
    """A plugin that could be loaded: its name, its module, and how to import it."""

    name: str
    module: str
    load: Callable[[], object]
    distribution: str | None
    version: str | None
    builtin: bool


class Selection:
    """``BACKLINE_PLUGINS`` (allow list; ``None``: all) and ``BACKLINE_DISABLE_PLUGINS``."""

    def __init__(self, allow: Collection[str] | None, deny: Collection[str]) -> None:
        self.allow = None if allow is None else frozenset(normalize_name(n) for n in allow)
        self.deny = frozenset(normalize_name(n) for n in deny)

    def disabled_by(self, candidate: Candidate) -> str | None:
        """The variable that disables ``candidate``, or None if it is selected."""
        keys = {normalize_name(candidate.name)}
        if candidate.distribution:
            keys.add(normalize_name(candidate.distribution))
        if self.allow is not None and not keys & self.allow:
            return ENV_ALLOW
        return ENV_DENY if keys & self.deny else None

    def warnings(self, candidates: Iterable[Candidate]) -> list[str]:
        """Names that match no plugin, and built-ins that the lists disable."""
        candidates = list(candidates)
        known = {normalize_name(c.name) for c in candidates}
        known |= {normalize_name(c.distribution) for c in candidates if c.distribution}
        found = [
            f"{env} names '{name}', but no plugin of that name is installed"
            for env, names in ((ENV_ALLOW, self.allow or frozenset()), (ENV_DENY, self.deny))
            for name in sorted(names - known)
        ]
        for candidate in candidates:
            by = self.disabled_by(candidate) if candidate.builtin else None
            # An allow-list that leaves out a built-in is worth a warning only when the
            # built-in is a default the user relies on without naming it (the LLM); the
            # built-in speech engines are named when wanted, and a missing one says why.
            if by == ENV_DENY or (by == ENV_ALLOW and candidate.name in _DEFAULTS):
                found.append(_builtin_disabled(candidate.name, by))
        return found


def _builtin_loader(module: str) -> Callable[[], object]:
    """How a built-in plugin's module is imported (by name, as an installed plugin's)."""

    def load() -> object:
        if module == "backline.plugins._builtin":
            from . import _builtin

            return _builtin
        if module == "backline.plugins._builtin_speech":
            from . import _builtin_speech

            return _builtin_speech
        raise ImportError(f"no built-in plugin module {module!r}")  # pragma: no cover

    return load


def builtin_candidates() -> list[Candidate]:
    from .._version import __version__

    return [
        Candidate(
            name=name,
            module=module,
            load=_builtin_loader(module),
            distribution="backline",
            version=__version__,
            builtin=True,
        )
        for name, module in BUILTIN_PLUGINS
    ]


def entry_point_candidates(warn: Callable[[str], None]) -> list[Candidate]:
    """Every ``backline`` entry point (the first distribution of a name on
    ``sys.path`` wins, as for imports), sorted by name. Only plugins' metadata is parsed."""
    import importlib.metadata as md

    try:
        entry_points = md.entry_points(group=ENTRY_POINT_GROUP)
    except Exception as e:
        warn(f"cannot list the installed plugins: {describe(e)}")
        return []
    found: list[Candidate] = []
    for ep in entry_points:
        dist_name: str | None = None
        version: str | None = None
        if ep.dist is not None:
            try:
                dist_name, version = ep.dist.metadata["Name"], ep.dist.version
            except Exception as e:
                warn(f"cannot read the metadata of plugin '{ep.name}': {describe(e)}")
        found.append(Candidate(ep.name, ep.value, ep.load, dist_name, version, builtin=False))
    return sorted(found, key=lambda c: (normalize_name(c.name), c.distribution or ""))


_DEFAULTS = {"anthropic": "the built-in Anthropic LLM (the default --llm)"}
"""Built-ins that provide a default a user gets without naming it."""


def _builtin_disabled(name: str, by: str) -> str:
    what = _DEFAULTS.get(name, f"the built-in plugin '{name}'")
    if by == ENV_ALLOW:
        return (
            f"{ENV_ALLOW} does not name '{name}', so {what} is disabled; "
            f"add '{name}' to {ENV_ALLOW} to keep it"
        )
    return f"{ENV_DENY} names '{name}', so {what} is disabled"
