"""Stored API keys: ``backline keys set NAME``; an environment variable wins over a stored key.

Keys are stored by their environment variable's name (``ANTHROPIC_API_KEY``,
``OPENAI_API_KEY``, ``GROQ_API_KEY`` ...), in upper case (``set_key`` takes
``anthropic_api_key`` as ``ANTHROPIC_API_KEY``: every provider looks its key up by the
upper-case name, so a lower-case one would be stored and never used), in
``keys.json`` in the user's config directory (``$XDG_CONFIG_HOME/backline`` on
Linux), readable by the user only (0600). Every provider looks its key up with
``get_key(name)``: the variable if it is set, else the stored key. No function here
logs or prints a key.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path

__all__ = [
    "KeyStoreError",
    "config_dir",
    "delete_key",
    "get_key",
    "key_name",
    "key_names",
    "keys_path",
    "set_key",
]

log = logging.getLogger(__name__)

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


class KeyStoreError(Exception):
    """The key store cannot be read or written, or a name or key is not valid."""


def config_dir() -> Path:
    """backline's directory in the user's config directory (``platformdirs``; on Linux
    ``$XDG_CONFIG_HOME/backline``, else ``~/.config/backline``)."""
    import platformdirs

    return platformdirs.user_config_path("backline", appauthor=False)


def keys_path() -> Path:
    """The file stored keys live in."""
    return config_dir() / "keys.json"


def get_key(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The key for ``name``: the environment variable ``name`` when it is set and not
    empty, else the stored key, else ``None``. Raises ``KeyStoreError`` if the store
    exists but cannot be read."""
    env = os.environ if environ is None else environ
    value = env.get(name)
    if value:
        return value
    return _load().get(name)


def key_names() -> list[str]:
    """The names of the stored keys, sorted (never the keys)."""
    return sorted(_load())


def set_key(name: str, value: str) -> Path:
    """Store ``value`` as the key ``key_name(name)`` (the name in upper case, surrounding
    whitespace of the key removed); returns the file. The file is replaced atomically
    and is readable by the user only."""
    name = key_name(name)
    value = value.strip()
    if not value:
        raise KeyStoreError(f"no key was given for {name}; nothing was stored")
    if any(c.isspace() for c in value):
        raise KeyStoreError(f"the key for {name} contains whitespace; nothing was stored")
    keys = _load()
    keys[name] = value
    return _save(keys)


def delete_key(name: str) -> bool:
    """Remove the stored key ``name`` (as stored, else in upper case); ``False`` if there
    was none. A key stored under a lower-case name before names were normalised is
    removed by that name."""
    check_name(name)
    keys = _load()
    stored = name if name in keys else name.upper()
    if stored not in keys:
        return False
    del keys[stored]
    _save(keys)
    return True


def key_name(name: str) -> str:
    """The name a key is stored and looked up by: ``name`` checked, in upper case.

    Raises ``KeyStoreError`` unless ``name`` is an environment variable name."""
    check_name(name)
    return name.upper()


def check_name(name: str) -> None:
    """Raise ``KeyStoreError`` unless ``name`` is an environment variable name."""
    if not _NAME.fullmatch(name):
        raise KeyStoreError(
            f"{name!r} is not a key name: use the environment variable's name, "
            "e.g. OPENAI_API_KEY (letters, digits and _, not starting with a digit)"
        )


def _load() -> dict[str, str]:
    path = keys_path()
    try:
        info = path.stat()
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as e:
        raise KeyStoreError(f"cannot read the key store {path}: {e}") from None
    if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        log.warning("%s can be read by other users: run `chmod 600 %s`", path, path)
    try:
        data = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError as e:
        raise KeyStoreError(
            f"the key store {path} is not valid JSON ({e.msg}, line {e.lineno}): fix it, or "
            "delete it and store the keys again with `backline keys set NAME`"
        ) from None
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in data.items()
    ):
        raise KeyStoreError(
            f"the key store {path} is not a JSON object of names to keys: fix it, or delete "
            "it and store the keys again with `backline keys set NAME`"
        )
    return data


def _save(keys: dict[str, str]) -> Path:
    import tempfile

    path = keys_path()
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".keys-", suffix=".json", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:  # mkstemp: mode 0600
                json.dump(keys, f, indent=2, sort_keys=True)
                f.write("\n")
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, 0o600)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError as e:
        raise KeyStoreError(f"cannot write the key store {path}: {e.strerror or e}") from None
    return path
