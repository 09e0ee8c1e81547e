"""``backline plugins search [WORDS]``: the ``backline-*`` distributions on the package
index pip uses, with summaries and whether each is installed (issue 26, "Beyond").

The indexes are static folders served on loopback, laid out as real ones are: one like
PyPI (the simple API and the JSON API beside it), one with the simple API only (PEP 503
pages, PEP 658 metadata files)."""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from .conftest import FakeSite, run_backline


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def simple_page(*names: str) -> str:
    return "".join(f'<a href="{n}/">{n}</a>\n' for n in names)


def build_indexes(root: Path) -> None:
    # "warehouse": /warehouse/simple/ and /warehouse/pypi/NAME/json, like PyPI.
    write(
        root / "warehouse/simple/index.html",
        "<!DOCTYPE html><html><body>\n"
        + simple_page("requests", "backline-weather", "backline_Notes", "backlinez", "backline-")
        + "</body></html>",
    )
    write(
        root / "warehouse/pypi/backline-weather/json",
        json.dumps({"info": {"version": "1.2.0", "summary": "Weather  for the\nvoice agent"}}),
    )
    # backline-notes has no JSON API page: its summary comes from its file's metadata.
    write(
        root / "warehouse/simple/backline-notes/index.html",
        '<a href="../../files/backline_notes-0.3.0-py3-none-any.whl#sha256=00" '
        'data-core-metadata="sha256=11">backline_notes-0.3.0-py3-none-any.whl</a>',
    )
    write(
        root / "warehouse/files/backline_notes-0.3.0-py3-none-any.whl.metadata",
        "Metadata-Version: 2.1\nName: backline-notes\nVersion: 0.3.0\n"
        "Summary: Notes that stay between conversations\n",
    )
    # "plain": the simple API only.
    write(root / "plain/simple/index.html", simple_page("backline-weather", "backline-tides"))
    write(
        root / "plain/simple/backline-tides/index.html",
        '<a href="/files/backline-tides-0.1.tar.gz">backline-tides-0.1.tar.gz</a>\n'
        '<a href="/files/backline_tides-0.2-py3-none-any.whl" data-dist-info-metadata="true">'
        "backline_tides-0.2-py3-none-any.whl</a>\n",
    )
    write(
        root / "files/backline_tides-0.2-py3-none-any.whl.metadata",
        "Metadata-Version: 2.1\nName: backline-tides\nVersion: 0.2\nSummary: Tide tables\n",
    )


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def index_url(tmp_path: Path) -> Iterator[str]:
    """The base URL of the loopback server holding both indexes."""
    root = tmp_path / "index"
    build_indexes(root)
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=root))
    thread = threading.Thread(target=server.serve_forever, name="test package index")
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture
def env(site: FakeSite, index_url: str) -> dict[str, str]:
    """pip configured through its variables: the PyPI-like index, the plain one as extra;
    backline-weather 1.0.0 installed."""
    site.add("backline-weather", {}, {}, version="1.0.0")
    return site.env(
        PIP_NO_INDEX="0",
        PIP_INDEX_URL=f"{index_url}/warehouse/simple/",
        PIP_EXTRA_INDEX_URL=f"{index_url}/plain/simple",
    )


def test_search_lists_the_plugins_on_pips_indexes_with_summaries(env: dict[str, str]) -> None:
    result = run_backline("plugins", "search", env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(
        "backline_Notes 0.3.0\n"
        "  Notes that stay between conversations\n"
        "backline-tides 0.2\n"
        "  Tide tables\n"
        "backline-weather 1.2.0 [installed: 1.0.0]\n"
        "  Weather for the voice agent\n"
    ), result.stdout
    for other in ("requests", "backlinez", "backline-\n"):
        assert other not in result.stdout


def test_words_narrow_the_list_by_name_or_summary(env: dict[str, str]) -> None:
    by_summary = run_backline("plugins", "search", "VOICE", env=env)
    assert by_summary.stdout.splitlines()[0] == "backline-weather 1.2.0 [installed: 1.0.0]"
    assert "tides" not in by_summary.stdout
    by_name = run_backline("plugins", "search", "tide", "tables", env=env)
    assert by_name.stdout.startswith("backline-tides 0.2\n")
    assert "weather" not in by_name.stdout
    none = run_backline("plugins", "search", "cooking", env=env)
    assert none.returncode == 0
    assert "No backline plugins matching 'cooking' on " in none.stdout


def test_search_json(env: dict[str, str], index_url: str) -> None:
    result = run_backline("plugins", "search", "--json", "weather", env=env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [
        {
            "name": "backline-weather",
            "version": "1.2.0",
            "summary": "Weather for the voice agent",
            "installed": "1.0.0",
            "index": f"{index_url}/warehouse/simple/",  # the first index that has it
        }
    ]


def test_pips_configuration_file_is_honoured(
    site: FakeSite, index_url: str, tmp_path: Path
) -> None:
    config = tmp_path / "pip.conf"
    config.write_text(f"[global]\nindex-url = {index_url}/plain/simple/\n")
    result = run_backline(
        "plugins", "search", "--json", env=site.env(PIP_NO_INDEX="0", PIP_CONFIG_FILE=str(config))
    )
    assert result.returncode == 0, result.stderr
    listed = {item["name"]: item for item in json.loads(result.stdout)}
    assert sorted(listed) == ["backline-tides", "backline-weather"]
    assert listed["backline-weather"]["installed"] is None


def test_an_index_url_option_replaces_pips(env: dict[str, str], index_url: str) -> None:
    result = run_backline("plugins", "search", "--index-url", f"{index_url}/plain/simple/", env=env)
    assert result.returncode == 0, result.stderr
    assert "backline_Notes" not in result.stdout
    assert "backline-tides 0.2" in result.stdout


def test_an_unreadable_index_is_skipped_or_reported(env: dict[str, str], index_url: str) -> None:
    skipped = run_backline(
        "plugins", "search", env={**env, "PIP_EXTRA_INDEX_URL": f"{index_url}/missing/simple/"}
    )
    assert skipped.returncode == 0, skipped.stderr
    assert "backline-weather 1.2.0" in skipped.stdout
    assert f"skipped an index: {index_url}/missing/simple/ answered 404" in skipped.stderr

    failed = run_backline("plugins", "search", "--index-url", "http://127.0.0.1:9/simple/", env=env)
    assert failed.returncode == 1
    assert "the package index could not be read (could not read http://127.0.0.1:9/simple/" in (
        failed.stderr
    )
    assert "--index-url URL" in failed.stderr


def test_no_index_in_pips_configuration_is_said(env: dict[str, str]) -> None:
    result = run_backline("plugins", "search", env={**env, "PIP_NO_INDEX": "1"})
    assert result.returncode == 1
    assert "pip is configured with no index" in result.stderr


def test_the_listing_of_installed_plugins_still_works(env: dict[str, str]) -> None:
    result = run_backline("plugins", "--all", env=env)
    assert result.returncode == 0, result.stderr
    assert "anthropic (built-in" in result.stdout
