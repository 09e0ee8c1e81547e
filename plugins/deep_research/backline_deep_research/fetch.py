"""Reading the web politely and safely: robots.txt, a per-host rate limit, timeouts,
a size cap counted on the decoded body, no private address, and text extraction
with trafilatura.

``Fetcher.fetch(url)`` returns a ``Page`` or raises ``FetchError`` saying why it
was skipped (the round counts it and goes on). Which hosts it reaches is
``hosts.py``'s rule; how a compressed body is decoded, ``decode.py``'s.
"""

from __future__ import annotations

import asyncio
import re
import time
import urllib.robotparser
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit, urlunsplit

from backline.tasks import TaskScope

from .config import ResearchLimits
from .decode import ACCEPT_ENCODING, ContentDecoder
from .errors import FetchError, HostRefused
from .hosts import Network

if TYPE_CHECKING:
    import httpx

USER_AGENT = "backline-deep-research/0.1"
"""The User-Agent sent with every request, and the name robots.txt rules are matched to."""

HTML_TYPES = ("text/html", "application/xhtml+xml")
TEXT_TYPES = ("text/plain", "text/markdown")
MAX_CRAWL_DELAY = 10.0
DISALLOW_ALL = ["User-agent: *", "Disallow: /"]
YIELD_AFTER = 0.002
"""Seconds of decoding after which a body's read gives the event loop its turn."""

__all__ = ["FetchError", "Fetcher", "HostRefused", "Page", "normalize_url"]


@dataclass(frozen=True)
class Page:
    """A page read and reduced to its text."""

    url: str
    title: str
    text: str


def normalize_url(url: str) -> str:
    """The identity of a source: lower-cased host and path, without scheme, ``www.``,
    query, fragment or trailing slash (``https://WWW.a.org/x/?q=1#f`` -> ``a.org/x``)."""
    parts = urlsplit(url.strip())
    host = (parts.hostname or "").lower()
    if host.startswith("www."):
        host = host[4:]
    if parts.port and parts.port not in (80, 443):
        host = f"{host}:{parts.port}"
    path = re.sub(r"/+", "/", parts.path).rstrip("/")
    return f"{host}{path}" if host else url.strip()


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc.lower(), "", "", ""))


class HostRateLimiter:
    """At most one request per ``interval`` seconds to each host (on the loop's clock).

    Requests to one host wait their turn in order; other hosts are not held up.
    """

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._next: dict[str, float] = {}
        self._delays: dict[str, float] = {}

    def set_delay(self, host: str, seconds: float) -> None:
        """A longer interval for one host (its robots.txt ``Crawl-delay``), capped."""
        self._delays[host] = min(max(seconds, self.interval), MAX_CRAWL_DELAY)

    async def wait(self, host: str) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        start = max(now, self._next.get(host, now))
        self._next[host] = start + self._delays.get(host, self.interval)
        if start > now:
            await asyncio.sleep(start - now)


class Fetcher:
    """Fetches pages for one research round (share one per round: it keeps robots.txt
    rules and the rate limit per host). ``client`` is an ``httpx.AsyncClient``, made
    with ``Fetcher.make_client`` (it refuses private addresses); close it yourself."""

    def __init__(self, client: httpx.AsyncClient, limits: ResearchLimits) -> None:
        self.client = client
        self.limits = limits
        self.rate = HostRateLimiter(limits.host_interval)
        self._robots: dict[str, asyncio.Task[urllib.robotparser.RobotFileParser]] = {}
        # The robots.txt reads, shared by the fetches to a host: each fetch reads the
        # outcome (log_failures=False), and aclose() cuts what still runs.
        self._robots_reads = TaskScope("robots.txt reads", log_failures=False)

    @staticmethod
    def make_client(
        limits: ResearchLimits,
        *,
        allow_private_hosts: bool = False,
        network: Network | None = None,
    ) -> httpx.AsyncClient:
        """The client pages are read with: it connects only to public addresses
        (``hosts.py``; all with ``allow_private_hosts``), through ``network`` (default:
        the system resolver and direct connections, no proxy)."""
        from .transport import guarded_client

        return guarded_client(
            headers={
                "User-Agent": USER_AGENT,
                "Accept": "text/html, text/plain;q=0.8",
                "Accept-Encoding": ACCEPT_ENCODING,
            },
            timeout=limits.fetch_timeout,
            allow_private=allow_private_hosts,
            network=network,
        )

    async def fetch(self, url: str) -> Page:
        """Read ``url`` (robots.txt, rate limit, redirects, size cap) and extract its text."""
        try:
            async with asyncio.timeout(self.limits.fetch_timeout):
                body, final_url, content_type = await self._get(url)
        except TimeoutError:
            raise FetchError(f"timed out after {self.limits.fetch_timeout:g} s") from None
        return await extract_page(body, final_url, content_type, self.limits)

    async def _get(self, url: str) -> tuple[bytes, str, str]:
        import httpx

        for _ in range(self.limits.max_redirects + 1):
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise FetchError(f"not an http(s) URL: {url}")
            if not await self.allowed(url):
                raise FetchError("disallowed by robots.txt")
            await self.rate.wait(parts.netloc.lower())
            try:
                async with self.client.stream("GET", url) as response:
                    if response.is_redirect:
                        location = response.headers.get("location")
                        if not location:
                            raise FetchError(f"HTTP {response.status_code} without a Location")
                        url = urljoin(url, location)
                        continue
                    if response.status_code != 200:
                        raise FetchError(f"HTTP {response.status_code}")
                    content_type = response.headers.get("content-type", "").split(";")[0]
                    content_type = content_type.strip().lower()
                    if content_type not in HTML_TYPES + TEXT_TYPES:
                        raise FetchError(f"unsupported content type {content_type or 'none'!r}")
                    body = await read_capped(response, self.limits.max_page_bytes)
                    return body, str(response.url), content_type
            except httpx.HTTPError as e:
                raise FetchError(f"{type(e).__name__}: {e}".rstrip(": ")) from None
        raise FetchError(f"more than {self.limits.max_redirects} redirects")

    # -- robots.txt ---------------------------------------------------------------------
    async def allowed(self, url: str) -> bool:
        """Whether robots.txt of ``url``'s host lets us read it (read once per host)."""
        origin = _origin(url)
        task = self._robots.get(origin)
        if task is None:
            # Shared by every fetch to this host (one cancelled fetch does not cancel
            # it); the fetcher's until aclose().
            task = self._robots_reads.create_task(
                self._read_robots(origin), name=f"robots.txt of {origin}"
            )
            self._robots[origin] = task
        rules = await asyncio.shield(task)
        return rules.can_fetch(USER_AGENT, url)

    async def _read_robots(self, origin: str) -> urllib.robotparser.RobotFileParser:
        import httpx

        rules = urllib.robotparser.RobotFileParser()
        host = urlsplit(origin).netloc
        try:
            await self.rate.wait(host)
            async with self.client.stream("GET", origin + "/robots.txt") as response:
                status = response.status_code
                if status >= 500:  # RFC 9309: unreachable robots.txt means "disallow all"
                    rules.parse(DISALLOW_ALL)
                elif 400 <= status < 500 or response.is_redirect:
                    rules.parse([])  # no robots.txt: everything is allowed
                else:
                    body = await read_capped(response, self.limits.max_page_bytes)
                    rules.parse(body.decode("utf-8", "replace").splitlines())
        except HostRefused:
            raise  # said as such, not as "disallowed by robots.txt"
        except (httpx.HTTPError, FetchError):
            rules.parse(DISALLOW_ALL)
        delay = rules.crawl_delay(USER_AGENT)
        if delay:
            self.rate.set_delay(host, float(delay))
        return rules

    async def aclose(self) -> None:
        """Cancel robots.txt reads still running (a closed round leaves no task)."""
        await self._robots_reads.aclose()


async def read_capped(response: Any, cap: int) -> bytes:
    """The body, decoded, refused (``FetchError``) when it is, or announces to be, over
    ``cap`` bytes: on the wire, or at any step of undoing its ``Content-Encoding``.

    Decoding goes in small steps, counted as they are produced (a decompression bomb
    stops at the cap), and gives the event loop its turn every ``YIELD_AFTER``
    seconds (the voice session keeps running, the fetch timeout can fire).
    """
    declared = response.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > cap:
        raise FetchError(f"too large ({int(declared)} bytes; the cap is {cap})")
    decoder = ContentDecoder(response.headers.get("content-encoding", ""), cap)
    chunks: list[bytes] = []
    wire = size = 0
    turn = time.perf_counter()

    async def keep(pieces: Any) -> None:
        nonlocal size, turn
        for piece in pieces:
            size += len(piece)
            if size > cap:
                raise FetchError(f"too large (over the {cap}-byte cap)")
            if piece:
                chunks.append(piece)
            if time.perf_counter() - turn > YIELD_AFTER:
                await asyncio.sleep(0)
                turn = time.perf_counter()

    async for raw in response.aiter_raw():
        wire += len(raw)
        if wire > cap:
            raise FetchError(f"too large (over the {cap}-byte cap)")
        await keep(decoder.feed(raw))
    await keep(decoder.finish())
    return b"".join(chunks)


async def extract_page(body: bytes, url: str, content_type: str, limits: ResearchLimits) -> Page:
    """The page's main text (trafilatura for HTML, in a thread), capped at ``page_chars``."""
    from backline.limits import truncate_text

    if content_type in HTML_TYPES:
        title, text = await asyncio.to_thread(extract_html, body, url)
    else:
        title, text = "", body.decode("utf-8", "replace")
    text = text.strip()
    if not text:
        raise FetchError("no readable text")
    text, _ = truncate_text(text, limits.page_chars, "page text")
    return Page(url=url, title=title or url, text=text)


def extract_html(html: bytes | str, url: str | None = None) -> tuple[str, str]:
    """``(title, text)`` of an HTML document: its main content, without boilerplate."""
    import trafilatura

    doc: Any = trafilatura.bare_extraction(
        html,
        url=url,
        include_comments=False,
        include_tables=True,
        with_metadata=True,
        favor_recall=True,
    )
    if doc is None:
        return "", ""
    title = getattr(doc, "title", None) or ""
    text = getattr(doc, "text", None) or ""
    return str(title), str(text)
