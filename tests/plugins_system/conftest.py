"""Helpers for the plugin-system tests: installed-looking plugins, and a venv to pip into.

- ``site``: a directory on ``sys.path`` where ``site.add(...)`` writes a plugin
  distribution the way pip lays one out (modules + ``*.dist-info`` with
  ``entry_points.txt``), so ``importlib.metadata`` discovers it. Subprocesses see
  it through ``site.env()`` (``PYTHONPATH``).
- ``overlay_python``: a throwaway venv whose ``site-packages`` comes first and
  that also sees the dev venv's packages (backline, pip, hatchling), so tests can
  ``pip install`` / ``uninstall`` for real without touching the shared venv.
- ``build_wheel(...)``: a real wheel file, written by hand (no build backend).
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import os
import subprocess
import sys
import sysconfig
import textwrap
import uuid
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

SUBPROCESS_TIMEOUT = 120


def unique(prefix: str) -> str:
    """A name no other test (or run) uses: plugins and modules never collide."""
    return f"{prefix}{uuid.uuid4().hex[:8]}"


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a subprocess: no BACKLINE_* or PIP_* leaking in, pip offline."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BACKLINE_", "PIP_"))}
    env.pop("PYTHONPATH", None)
    env.update(
        {
            "PIP_NO_INDEX": "1",
            "PIP_CONFIG_FILE": os.devnull,
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            # pip's spelling for --no-build-isolation in the environment: "0"/"false".
            "PIP_NO_BUILD_ISOLATION": "0",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
    )
    env.update(extra or {})
    return env


def run_backline(
    *args: str,
    python: str | Path = sys.executable,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """``python -m backline ARGS`` in a subprocess; output captured as text."""
    return subprocess.run(
        [str(python), "-m", "backline", *args],
        capture_output=True,
        text=True,
        env=clean_env(env),
        cwd=cwd,
        timeout=SUBPROCESS_TIMEOUT,
        check=False,
    )


def plugins_json(result: subprocess.CompletedProcess[str]) -> dict[str, dict[str, Any]]:
    assert result.returncode == 0, result.stderr
    return {p["name"]: p for p in json.loads(result.stdout)}


def dist_info_files(dist: str, version: str, entry_points: Mapping[str, str]) -> dict[str, str]:
    """The metadata files of an installed distribution (``RECORD`` aside)."""
    lines = "".join(f"{name} = {target}\n" for name, target in entry_points.items())
    info = f"{dist.replace('-', '_')}-{version}.dist-info"
    return {
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n",
        f"{info}/entry_points.txt": f"[backline]\n{lines}",
        f"{info}/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: backline-tests\nRoot-Is-Purelib: true\n"
            "Tag: py3-none-any\n"
        ),
    }


class FakeSite:
    """A directory on ``sys.path`` holding plugin distributions."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.modules: list[str] = []

    def add(
        self,
        dist: str,
        modules: Mapping[str, str],
        entry_points: Mapping[str, str],
        *,
        version: str = "1.0.0",
    ) -> None:
        """``modules`` maps a module name to its source (dedented)."""
        files = dist_info_files(dist, version, entry_points)
        for name, source in modules.items():
            files[name.replace(".", "/") + ".py"] = textwrap.dedent(source)
            self.modules.append(name)
        for relative, text in files.items():
            target = self.path / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)

    def env(self, **extra: str) -> dict[str, str]:
        return {"PYTHONPATH": str(self.path), **extra}


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeSite]:
    for name in ("BACKLINE_PLUGINS", "BACKLINE_DISABLE_PLUGINS", "BACKLINE_STRICT_PLUGINS"):
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "site"
    path.mkdir()
    monkeypatch.syspath_prepend(str(path))
    fake = FakeSite(path)
    try:
        yield fake
    finally:
        for name in fake.modules:
            sys.modules.pop(name, None)


def build_wheel(
    directory: Path,
    dist: str,
    modules: Mapping[str, str],
    entry_points: Mapping[str, str],
    *,
    version: str = "1.0.0",
) -> Path:
    """Write a pure-Python wheel for a plugin and return its path."""
    files = dist_info_files(dist, version, entry_points)
    for name, source in modules.items():
        files[name.replace(".", "/") + ".py"] = textwrap.dedent(source)
    info = f"{dist.replace('-', '_')}-{version}.dist-info"
    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    for relative, text in files.items():
        data = text.encode()
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        writer.writerow([relative, f"sha256={digest}", len(data)])
    writer.writerow([f"{info}/RECORD", "", ""])
    files[f"{info}/RECORD"] = record.getvalue()
    path = directory / f"{dist.replace('-', '_')}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        for relative, text in files.items():
            wheel.writestr(relative, text)
    return path


@pytest.fixture(scope="session")
def overlay_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv layered over the dev venv: installs land in it, imports fall through."""
    root = tmp_path_factory.mktemp("overlay") / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(root)],
        check=True,
        timeout=SUBPROCESS_TIMEOUT,
    )
    python = root / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
        timeout=SUBPROCESS_TIMEOUT,
    ).stdout.strip()
    dev_site = sysconfig.get_paths()["purelib"]
    (Path(purelib) / "_backline_dev_venv.pth").write_text(
        f"import site; site.addsitedir({dev_site!r})\n"
    )
    return python
