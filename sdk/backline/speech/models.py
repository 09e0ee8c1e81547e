"""Model files for speech engines: where they live, and their download.

An engine that needs a model names it with a ``ModelSpec`` (its files, each with a
URL, a size and a SHA-256). ``download(spec)`` fetches what is missing into the
user's cache (``models_dir()``: ``$BACKLINE_MODELS_DIR``, else the platform's cache
folder), with progress, resuming a partial file where it stopped (an HTTP range
request), and checks every file's checksum before it is used: a file that does not
match is deleted and the download fails saying so. Nothing is fetched without being
asked (``backline speech download NAME``, or an engine's first use), and a machine
that is offline gets a message saying what to do.
"""

from __future__ import annotations

import hashlib
import os
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "DownloadError",
    "ModelFile",
    "ModelSpec",
    "download",
    "is_downloaded",
    "model_dir",
    "models_dir",
]

MODELS_ENV = "BACKLINE_MODELS_DIR"
CHUNK = 256 * 1024
TIMEOUT = 30.0  # seconds a read may wait

Progress = Callable[[int, int], None]
"""``progress(done_bytes, total_bytes)``, called as a download goes."""


class DownloadError(RuntimeError):
    """A model could not be downloaded (the message says why and what to do)."""


@dataclass(frozen=True)
class ModelFile:
    name: str  # the file name in the model's folder
    url: str
    sha256: str
    size: int


@dataclass(frozen=True)
class ModelSpec:
    """A model of an engine: ``engine/name`` in the cache, made of ``files``."""

    engine: str
    name: str
    files: tuple[ModelFile, ...]
    description: str = ""

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def id(self) -> str:
        return f"{self.engine}/{self.name}"


def models_dir() -> Path:
    """Where downloaded models live."""
    configured = os.environ.get(MODELS_ENV, "").strip()
    if configured:
        return Path(configured).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("backline")) / "models"


def model_dir(spec: ModelSpec) -> Path:
    return models_dir() / spec.engine / spec.name


def is_downloaded(spec: ModelSpec) -> bool:
    """Every file is there, whole (checked at download: a file is only renamed into
    place once its checksum matched)."""
    folder = model_dir(spec)
    return all(
        (folder / f.name).is_file() and (folder / f.name).stat().st_size == f.size
        for f in spec.files
    )


def download(spec: ModelSpec, *, progress: Progress | None = None) -> Path:
    """Fetch what is missing of ``spec`` (blocking: call it in a worker thread from async
    code); returns the model's folder. Raises ``DownloadError`` saying why."""
    folder = model_dir(spec)
    folder.mkdir(parents=True, exist_ok=True)
    total = spec.size
    done = sum(
        f.size for f in spec.files if (folder / f.name).is_file()
    )  # whole files count at once
    for file in spec.files:
        target = folder / file.name
        if target.is_file() and target.stat().st_size == file.size:
            continue
        done = _fetch(spec, file, target, done, total, progress)
    return folder


def _fetch(
    spec: ModelSpec,
    file: ModelFile,
    target: Path,
    done: int,
    total: int,
    progress: Progress | None,
) -> int:
    part = target.with_name(target.name + ".part")
    have = part.stat().st_size if part.is_file() else 0
    if have > file.size:
        part.unlink()
        have = 0
    digest = hashlib.sha256()
    if have:
        with part.open("rb") as f:
            while chunk := f.read(CHUNK):
                digest.update(chunk)
    done += have
    if have < file.size:
        request = urllib.request.Request(file.url, headers={"User-Agent": "backline"})
        if have:
            request.add_header("Range", f"bytes={have}-")
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
                if have and response.status != 206:  # no range support: start over
                    have, digest = 0, hashlib.sha256()
                    done -= part.stat().st_size if part.is_file() else 0
                    part.write_bytes(b"")
                with part.open("ab") as out:
                    while chunk := response.read(CHUNK):
                        out.write(chunk)
                        digest.update(chunk)
                        have += len(chunk)
                        done += len(chunk)
                        if progress is not None:
                            progress(done, total)
        except (urllib.error.URLError, OSError, TimeoutError) as e:
            raise _interrupted(spec, file, target, _reason(e)) from None
        if have < file.size:  # the connection ended before the file did
            raise _interrupted(spec, file, target, f"the download stopped at {have} bytes")
    if have != file.size or digest.hexdigest() != file.sha256:
        part.unlink(missing_ok=True)
        raise DownloadError(
            f"{spec.id}: {file.name} from {file.url} is not the expected file "
            f"({have} bytes, SHA-256 {digest.hexdigest()[:16]}…; expected {file.size} bytes, "
            f"{file.sha256[:16]}…). It was deleted; try again, or report it if it persists"
        )
    part.replace(target)
    return done


def _interrupted(spec: ModelSpec, file: ModelFile, target: Path, why: str) -> DownloadError:
    return DownloadError(
        f"could not download {spec.id} ({file.name}) from {file.url}: {why}. Are you "
        f"offline? Run `backline speech download {spec.id}` again when you are online (it "
        f"goes on where it stopped), or put the file in {target.parent}"
    )


def _reason(error: BaseException) -> str:
    if isinstance(error, urllib.error.HTTPError):
        return f"HTTP {error.code} {error.reason}"
    if isinstance(error, urllib.error.URLError):
        return str(error.reason)
    return str(error) or type(error).__name__
