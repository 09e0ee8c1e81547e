"""``backline new-plugin``: write a ready-to-install plugin package from templates.

The templates live beside this module, in ``template/*.tmpl`` (package data),
as ``string.Template`` text: ``${name}`` is substituted, ``$$`` is a dollar.
"""

from __future__ import annotations

import keyword
import re
import string
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path

from ._discovery import normalize_name

_VALID = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*")
_PREFIX = "backline-"

# (template, path in the package; ``{package}`` is the import package)
_FILES: tuple[tuple[str, str], ...] = (
    ("pyproject.toml.tmpl", "pyproject.toml"),
    ("README.md.tmpl", "README.md"),
    ("gitignore.tmpl", ".gitignore"),
    ("__init__.py.tmpl", "src/{package}/__init__.py"),
    ("plugin.py.tmpl", "src/{package}/plugin.py"),
    ("patterns.py.tmpl", "src/{package}/patterns.py"),
    ("test_plugin.py.tmpl", "tests/test_plugin.py"),
    ("test_patterns.py.tmpl", "tests/test_patterns.py"),
)


@dataclass(frozen=True)
class PluginNames:
    """The names a new plugin package uses, all derived from the one given."""

    distribution: str
    entry_point: str
    package: str
    background_id: str
    function: str
    backline_version: str


def plugin_names(name: str) -> PluginNames:
    """``weather`` or ``backline-weather`` -> distribution ``backline-weather``,
    plugin (entry point) and background ``weather``, package ``backline_weather``."""
    raw = name.strip()
    if not _VALID.fullmatch(raw):
        raise ValueError(
            f"invalid plugin name {name!r}: start with a letter and use only letters, "
            "digits, '-', '_' and '.'"
        )
    norm = normalize_name(raw)
    short = norm[len(_PREFIX) :] if norm.startswith(_PREFIX) else norm
    if not short or not short[0].isalpha():
        raise ValueError(
            f"invalid plugin name {name!r}: the part after 'backline-' must start with a letter"
        )
    function = short.replace("-", "_")
    if keyword.iskeyword(function):
        function += "_session"
    from .._version import __version__

    major, minor = __version__.split(".")[:2]
    return PluginNames(
        distribution=_PREFIX + short,
        entry_point=short,
        package=(_PREFIX + short).replace("-", "_"),
        background_id=short,
        function=function,
        backline_version=f"{major}.{minor}",
    )


def create_plugin(name: str, directory: str | Path = ".") -> tuple[Path, list[Path]]:
    """Write a new plugin package into ``directory/<distribution>``.

    Returns the package root and the files written. Raises ``ValueError`` for a
    bad name and ``FileExistsError`` if the target exists and is not empty.
    """
    names = plugin_names(name)
    root = Path(directory) / names.distribution
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise FileExistsError(f"{root} already exists and is not empty; choose another --dir")
    values = asdict(names)
    templates = resources.files(__package__ or "backline.plugins").joinpath("template")
    rendered: list[tuple[Path, str]] = []
    for template, relative in _FILES:
        source = templates.joinpath(template).read_text(encoding="utf-8")
        text = string.Template(source).substitute(values)
        rendered.append((root / relative.format(package=names.package), text))
    written: list[Path] = []
    for path, text in rendered:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return root, written
