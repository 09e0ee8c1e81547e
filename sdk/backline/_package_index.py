"""Finding backline plugins on the package index pip uses (``backline plugins search``).

A plugin is listed when its distribution name starts with ``backline-`` (docs/plugins.md,
"The plugin directory"). The names come from the index's simple API (PEP 503: the
root page, read as it streams in, never held whole); each plugin's summary and newest
version from the index's JSON API when it has one (``/pypi/NAME/json``, PyPI's), else
from the core metadata of its newest file (PEP 658). The indexes are pip's own: its
``index-url`` and ``extra-index-url`` as ``pip config list`` reports them (the
configuration files and the ``PIP_*`` variables), unless one is given.
"""

from __future__ import annotations

import ast
import email.parser
import importlib.metadata as md
import json
import re
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from ._version import __version__

PREFIX = "backline-"
"""A plugin's distribution name starts with this (after PEP 503 normalisation)."""
DEFAULT_INDEX = "https://pypi.org/simple/"
TIMEOUT = 20.0
"""Seconds for one request to answer."""
_CHUNK = 1 << 16
_TRUE = {"1", "true", "yes", "on"}


class IndexUnreadable(Exception):
    """An index could not be read: the message says which and why."""


@dataclass(frozen=True)
class Listing:
    """A ``backline-*`` distribution on an index."""

    name: str
    version: str | None
    summary: str
    installed: str | None
    index: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def normalize(name: str) -> str:
    """PEP 503's normalised name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pip_indexes(python: str = sys.executable) -> list[str]:
    """The indexes pip would use: its ``index-url`` (default PyPI's) then its
    ``extra-index-url`` entries; empty when pip is configured with ``no-index``."""
    try:
        listed = subprocess.run(
            [python, "-m", "pip", "config", "list"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        listed = ""
    settings: dict[str, dict[str, str]] = {}
    for line in listed.splitlines():
        key, sep, raw = line.partition("=")
        if not sep or "." not in key:
            continue
        section, _, option = key.rpartition(".")
        try:
            value = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            value = raw
        settings.setdefault(option, {})[section] = str(value)

    def setting(option: str) -> str | None:
        found = settings.get(option, {})
        # Variables over the [install] section over [global], as pip reads them for install.
        return next((found[s] for s in (":env:", "install", "global") if s in found), None)

    if (setting("no-index") or "").strip().lower() in _TRUE:
        return []
    primary = setting("index-url") or DEFAULT_INDEX
    extra = (setting("extra-index-url") or "").split()
    return list(dict.fromkeys([primary, *extra]))


def search(indexes: Sequence[str], words: Sequence[str] = ()) -> tuple[list[Listing], list[str]]:
    """The ``backline-*`` distributions on ``indexes`` whose name or summary holds every
    one of ``words`` (case-insensitive), by name (the first index that has a name wins);
    and a line for each index that could not be read. Raises ``IndexUnreadable`` when none
    could."""
    found: dict[str, tuple[str, str]] = {}
    problems: list[str] = []
    for index in indexes:
        try:
            names = list(_plugin_names(index))
        except IndexUnreadable as e:
            problems.append(str(e))
            continue
        for name in names:
            found.setdefault(normalize(name), (name, index))
    if problems and len(problems) == len(indexes):
        raise IndexUnreadable("; ".join(problems))
    with ThreadPoolExecutor(max_workers=8) as pool:
        listings = list(pool.map(lambda item: _listing(*item), found.values()))
    wanted = [w.lower() for w in words]
    chosen = [
        item for item in listings if all(w in f"{item.name} {item.summary}".lower() for w in wanted)
    ]
    return sorted(chosen, key=lambda i: normalize(i.name)), problems


# -- reading an index ---------------------------------------------------------------------
def _plugin_names(index: str) -> Iterator[str]:
    """The names on the index's root page that start with ``backline-``."""
    root = _directory(index)
    if root is not None:  # a folder on disk: one folder per project
        yield from (p.name for p in sorted(root.iterdir()) if _is_plugin(p.name) and p.is_dir())
        return
    with _open(_slash(index), accept="text/html") as response:
        if "json" in (response.headers.get("Content-Type") or ""):
            projects = json.loads(response.read()).get("projects", [])
            yield from (p["name"] for p in projects if _is_plugin(str(p.get("name", ""))))
            return
        parser = _Anchors(keep=lambda text, attrs: _is_plugin(text))
        while chunk := response.read(_CHUNK):
            parser.feed(chunk.decode("utf-8", errors="replace"))
            yield from parser.take()
        parser.close()
        yield from parser.take()


def _listing(name: str, index: str) -> Listing:
    version, summary = _from_json_api(index, name) or _from_project_page(index, name)
    return Listing(
        name=name, version=version, summary=summary, installed=_installed(name), index=index
    )


def _from_json_api(index: str, name: str) -> tuple[str | None, str] | None:
    """``(version, summary)`` from PyPI's JSON API beside a ``.../simple/`` index."""
    path = urllib.parse.urlsplit(index).path.rstrip("/")
    if not path.endswith("/simple") or _directory(index) is not None:
        return None
    url = urllib.parse.urljoin(_slash(index), f"../pypi/{normalize(name)}/json")
    try:
        with _open(url, accept="application/json") as response:
            info = json.loads(response.read())["info"]
        return info.get("version"), " ".join(str(info.get("summary") or "").split())
    except (IndexUnreadable, ValueError, KeyError, TypeError):
        return None


def _from_project_page(index: str, name: str) -> tuple[str | None, str]:
    """``(version, summary)`` from the newest file's core metadata (PEP 658), else the
    version from its file name."""
    page = urllib.parse.urljoin(_slash(index), f"{normalize(name)}/")
    try:
        root = _directory(index)
        if root is not None:
            html = (root / normalize(name) / "index.html").read_text(errors="replace")
        else:
            with _open(page, accept="text/html") as response:
                html = response.read().decode("utf-8", errors="replace")
    except (IndexUnreadable, OSError):
        return None, ""
    parser = _Anchors(keep=lambda text, attrs: True)
    parser.feed(html)
    parser.close()
    files = parser.take_links()
    if not files:
        return None, ""
    href, attrs = files[-1]
    version = _version_from_filename(name, urllib.parse.urlsplit(href).path.rsplit("/", 1)[-1])
    metadata_attrs = ("data-core-metadata", "data-dist-info-metadata")
    has_metadata = any(attrs.get(a) not in (None, "false") for a in metadata_attrs)
    if not has_metadata:
        return version, ""
    url = urllib.parse.urljoin(page, href).split("#", 1)[0] + ".metadata"
    try:
        with _open(url, accept="*/*") as response:
            headers = email.parser.Parser().parsestr(response.read().decode(errors="replace"))
    except (IndexUnreadable, OSError):
        return version, ""
    return headers.get("Version") or version, " ".join((headers.get("Summary") or "").split())


def _installed(name: str) -> str | None:
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None


def _version_from_filename(name: str, filename: str) -> str | None:
    """The version in a wheel's or an sdist's file name (``name-1.0-...``), or None."""
    parts = re.sub(r"(\.tar\.gz|\.zip|\.whl)$", "", filename).split("-")
    for i in range(1, len(parts)):
        if normalize("-".join(parts[:i])) == normalize(name):
            return parts[i]
    return None


def _is_plugin(name: str) -> bool:
    normal = normalize(name.strip())
    return normal.startswith(PREFIX) and len(normal) > len(PREFIX)


def _slash(url: str) -> str:
    return url if url.endswith("/") else url + "/"


def _directory(index: str) -> Path | None:
    """The folder of a ``file://`` index, or None."""
    parts = urllib.parse.urlsplit(index)
    if parts.scheme != "file":
        return None
    path = Path(urllib.request.url2pathname(parts.path))
    return path if path.is_dir() else None


def _open(url: str, *, accept: str) -> Any:
    request = urllib.request.Request(
        url, headers={"Accept": accept, "User-Agent": f"backline/{__version__}"}
    )
    try:
        return urllib.request.urlopen(request, timeout=TIMEOUT)
    except urllib.error.HTTPError as e:
        raise IndexUnreadable(f"{_display(url)} answered {e.code} {e.reason}") from None
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        raise IndexUnreadable(f"could not read {_display(url)}: {reason}") from None


def _display(url: str) -> str:
    """The URL without a password, as pip shows it."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    netloc = f"{parts.username}:****@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


class _Anchors(HTMLParser):
    """The anchors of a simple-API page, collected as it is fed."""

    def __init__(self, keep: Any) -> None:
        super().__init__()
        self._keep = keep
        self._href: str | None = None
        self._attrs: dict[str, str | None] = {}
        self._text: list[str] = []
        self._names: list[str] = []
        self._links: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._attrs = dict(attrs)
            self._href = self._attrs.get("href") or ""
            self._text = []

    def handle_data(self, data: str) -> None:
        if self._href is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._href is not None:
            text = "".join(self._text).strip()
            if self._keep(text, self._attrs):
                self._names.append(text)
                self._links.append((self._href, self._attrs))
            self._href = None

    def take(self) -> Iterable[str]:
        names, self._names = self._names, []
        return names

    def take_links(self) -> list[tuple[str, dict[str, str | None]]]:
        return list(self._links)
