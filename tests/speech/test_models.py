"""Model downloads (issue 27) against a file server on loopback: progress, checksums,
resuming a cut download, and what an offline machine is told."""

from __future__ import annotations

import hashlib
import http.server
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from backline.speech.models import (
    DownloadError,
    ModelFile,
    ModelSpec,
    download,
    is_downloaded,
    model_dir,
)

BLOB = os.urandom(700_000)
OTHER = os.urandom(5_000)


class Files(http.server.BaseHTTPRequestHandler):
    """Serves BLOB and OTHER, honouring ``Range``; ``cut_after`` bytes of the first
    BLOB response are sent, then the connection is dropped (once)."""

    cut_after: int | None = None
    requests: list[str | None] = []  # noqa: RUF012 - class-level record for the test

    def do_GET(self) -> None:
        body = {"/blob.bin": BLOB, "/other.bin": OTHER}.get(self.path)
        if body is None:
            self.send_error(404)
            return
        wanted = self.headers.get("Range")
        Files.requests.append(wanted)
        start = int(wanted.split("=")[1].rstrip("-")) if wanted else 0
        self.send_response(206 if wanted else 200)
        self.send_header("Content-Length", str(len(body) - start))
        self.end_headers()
        payload = body[start:]
        if Files.cut_after is not None and self.path == "/blob.bin":
            payload, Files.cut_after = payload[: Files.cut_after], None
            self.wfile.write(payload)
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.wfile.write(payload)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Files)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    Files.requests = []
    Files.cut_after = None
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BACKLINE_MODELS_DIR", str(tmp_path / "models"))
    return tmp_path / "models"


def spec(base: str, *, blob_hash: str | None = None) -> ModelSpec:
    return ModelSpec(
        "engine",
        "small",
        (
            ModelFile("model.bin", f"{base}/blob.bin", blob_hash or _sha(BLOB), len(BLOB)),
            ModelFile("vocab.bin", f"{base}/other.bin", _sha(OTHER), len(OTHER)),
        ),
    )


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_a_model_is_downloaded_with_progress_and_checked(server: str, cache: Path) -> None:
    model = spec(server)
    seen: list[tuple[int, int]] = []
    assert not is_downloaded(model)
    folder = download(model, progress=lambda done, total: seen.append((done, total)))
    assert folder == model_dir(model) == cache / "engine" / "small"
    assert (folder / "model.bin").read_bytes() == BLOB
    assert (folder / "vocab.bin").read_bytes() == OTHER
    assert is_downloaded(model)
    assert seen and seen[-1] == (len(BLOB) + len(OTHER), model.size)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    Files.requests.clear()
    download(model)  # nothing is missing: nothing is fetched
    assert Files.requests == []


def test_a_cut_download_goes_on_where_it_stopped(server: str) -> None:
    model = spec(server)
    Files.cut_after = 300_000
    with pytest.raises(DownloadError, match="goes on where it stopped"):
        download(model)
    part = model_dir(model) / "model.bin.part"
    assert part.stat().st_size == 300_000
    download(model)
    assert (model_dir(model) / "model.bin").read_bytes() == BLOB
    assert Files.requests[-2:] == ["bytes=300000-", None]  # the blob resumed; then vocab
    assert not part.exists()


def test_a_file_that_does_not_match_its_checksum_is_deleted(server: str) -> None:
    model = spec(server, blob_hash="0" * 64)
    with pytest.raises(DownloadError, match=r"is not the expected file.*It was deleted"):
        download(model)
    folder = model_dir(model)
    assert not (folder / "model.bin").exists() and not (folder / "model.bin.part").exists()
    assert not is_downloaded(model)


def test_offline_says_what_to_do() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    model = spec(f"http://127.0.0.1:{port}")
    with pytest.raises(DownloadError) as caught:
        download(model)
    message = str(caught.value)
    assert "Are you offline?" in message
    assert "backline speech download engine/small" in message
    assert str(model_dir(model)) in message
