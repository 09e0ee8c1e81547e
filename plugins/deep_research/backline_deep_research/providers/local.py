"""A folder of documents as a search engine: private research, and tests without a network.

Reads ``.md``, ``.markdown``, ``.txt``, ``.html`` and ``.htm`` files under the
folder (at most ``MAX_FILES`` files of at most ``MAX_FILE_BYTES`` each), once per
provider, and ranks them by how many of the query's words they contain (rarer
words weigh more). Each result carries the document's text, so nothing is fetched.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..config import ENV_DOCS
from ..search import SearchResult

SUFFIXES = (".md", ".markdown", ".txt", ".html", ".htm")
MAX_FILES = 2000
MAX_FILE_BYTES = 2_000_000
SNIPPET_CHARS = 240
_WORD = re.compile(r"[a-z0-9]+")
_STOP_WORDS = (
    "a an and are as at be by for from has have how in is it its of on or that the to "
    "was were what when where which who why will with does do did about into than then"
)
_STOP = frozenset(_STOP_WORDS.split(" "))


@dataclass(frozen=True)
class _Doc:
    path: Path
    title: str
    text: str
    words: frozenset[str]


def _words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP and len(w) > 1]


class LocalSearch:
    """Searches the documents in ``folder`` (default: ``$BACKLINE_RESEARCH_DOCS``)."""

    def __init__(self, folder: str | os.PathLike[str] | None = None) -> None:
        raw = folder if folder is not None else os.environ.get(ENV_DOCS, "").strip()
        if not raw:
            raise ValueError(
                f"the local search provider needs a folder: pass --research-docs or set {ENV_DOCS}"
            )
        path = Path(raw).expanduser().resolve()
        if not path.is_dir():
            raise ValueError(f"the local search folder {path} does not exist or is not a folder")
        self.folder = path
        self._docs: list[_Doc] | None = None

    def _index(self) -> list[_Doc]:
        if self._docs is not None:
            return self._docs
        docs: list[_Doc] = []
        files = sorted(p for p in self.folder.rglob("*") if p.suffix.lower() in SUFFIXES)
        for path in files[:MAX_FILES]:
            try:
                if not path.is_file() or path.stat().st_size > MAX_FILE_BYTES:
                    continue
                raw = path.read_text("utf-8", errors="replace")
            except OSError:
                continue
            if path.suffix.lower() in (".html", ".htm"):
                from ..fetch import extract_html

                title, text = extract_html(raw, path.as_uri())
            else:
                text = raw
                heading = re.search(r"^#\s+(.+)$", raw, re.MULTILINE)
                title = heading.group(1).strip() if heading else ""
            text = text.strip()
            if text:
                title = title or path.stem.replace("-", " ").replace("_", " ")
                docs.append(_Doc(path, title, text, frozenset(_words(title + " " + text))))
        self._docs = docs
        return docs

    async def search(self, query: str, *, max_results: int) -> list[SearchResult]:
        docs = self._index()
        terms = set(_words(query))
        if not docs or not terms:
            return []
        weight = {t: math.log(1 + len(docs) / (1 + sum(t in d.words for d in docs))) for t in terms}
        scored = [(sum(weight[t] for t in terms if t in d.words), i) for i, d in enumerate(docs)]
        ranked = sorted((s, i) for s, i in scored if s > 0)
        ranked.sort(key=lambda si: (-si[0], si[1]))
        return [
            SearchResult(
                title=docs[i].title,
                url=docs[i].path.as_uri(),
                snippet=" ".join(docs[i].text.split())[:SNIPPET_CHARS],
                content=docs[i].text,
            )
            for _, i in ranked[:max_results]
        ]

    async def aclose(self) -> None:
        self._docs = None
