"""Reading pages: 404, a hanging server, a page over the size cap, robots.txt, redirects,
the per-host rate limit, URL normalisation; and a round that skips and counts them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from backline_deep_research import Fetcher, FetchError, ResearchLimits, deep_research_background
from backline_deep_research import state as st
from backline_deep_research.fetch import HostRateLimiter, normalize_url
from backline_deep_research.testing import HANG, HUGE, CorpusServer, ScriptedResearcher

from backline.testing import BackgroundDriver, VirtualClock

from .conftest import FAST, round_end, web_config
from .corpus import PAGES

ROUTES = {
    "/bees/colony-losses": 404,
    "/bees/varroa": HANG,
    "/bees/pesticides": HUGE,
    "/moved": (301, "text/html", ""),
}
ROBOTS = "User-agent: *\nDisallow: /bees/europe\n"


@pytest.fixture
async def hostile() -> AsyncIterator[CorpusServer]:
    async with CorpusServer(PAGES, robots=ROBOTS, routes=ROUTES) as server:
        yield server


@pytest.fixture
async def fetcher() -> AsyncIterator[Fetcher]:
    limits = FAST.with_(fetch_timeout=1.0, max_page_bytes=100_000)
    async with Fetcher.make_client(limits, allow_private_hosts=True) as client:
        fetcher = Fetcher(client, limits)
        try:
            yield fetcher
        finally:
            await fetcher.aclose()


async def test_a_page_is_read_and_reduced_to_its_text(
    hostile: CorpusServer, fetcher: Fetcher
) -> None:
    page = await fetcher.fetch(hostile.page_url("/bees/queens"))
    assert page.title == "Queen bees"
    assert "A queen bee can lay up to 2000 eggs a day in spring." in page.text
    assert "Copyright" not in page.text and "Home" not in page.text  # boilerplate removed
    assert hostile.requested("/robots.txt") == 1
    assert hostile.requests[-1].headers["user-agent"] == "backline-deep-research/0.1"


@pytest.mark.parametrize(
    ("path", "error"),
    [
        ("/bees/colony-losses", "HTTP 404"),
        ("/bees/varroa", "timed out after 1 s"),
        ("/bees/pesticides", "too large (over the 100000-byte cap)"),
        ("/bees/europe", "disallowed by robots.txt"),
    ],
)
async def test_a_page_that_cannot_be_read_says_why(
    hostile: CorpusServer, fetcher: Fetcher, path: str, error: str
) -> None:
    with pytest.raises(FetchError, match=error.replace("(", r"\(").replace(")", r"\)")):
        await fetcher.fetch(hostile.page_url(path))
    if path == "/bees/europe":
        assert hostile.requested(path) == 0  # robots.txt said no: never requested


async def test_a_declared_length_over_the_cap_is_refused_before_reading(
    fetcher: Fetcher,
) -> None:
    big = "<p>" + "word " * 30_000 + "</p>"
    async with CorpusServer([], routes={"/big": (200, "text/html", big)}) as server:
        with pytest.raises(FetchError, match=r"too large \(150007 bytes; the cap is 100000\)"):
            await fetcher.fetch(server.page_url("/big"))


async def test_robots_rules_and_redirects(fetcher: Fetcher) -> None:
    routes = {"/go": (302, "text/html", "")}
    async with CorpusServer(PAGES, robots=None, routes=routes) as server:
        # No robots.txt (404): everything is allowed.
        assert await fetcher.allowed(server.page_url("/bees/queens"))
        # A redirect without a Location is an error, said plainly.
        with pytest.raises(FetchError, match="HTTP 302 without a Location"):
            await fetcher.fetch(server.page_url("/go"))
    async with CorpusServer(PAGES, routes={"/robots.txt": 503}) as server:
        # An unreachable robots.txt (5xx) means "disallow all" (RFC 9309).
        with pytest.raises(FetchError, match=r"disallowed by robots\.txt"):
            await fetcher.fetch(server.page_url("/bees/queens"))


async def test_the_rate_limit_spaces_requests_to_one_host(virtual_clock: VirtualClock) -> None:
    limiter = HostRateLimiter(1.0)
    times: dict[str, list[float]] = {"a": [], "b": []}

    async def request(host: str) -> None:
        await limiter.wait(host)
        times[host].append(round(virtual_clock.elapsed, 3))

    await asyncio.gather(*(request("a") for _ in range(3)), request("b"))
    assert times == {"a": [0.0, 1.0, 2.0], "b": [0.0]}
    limiter.set_delay("a", 60)  # a robots.txt Crawl-delay, capped at 10 s
    await request("a")
    await request("a")
    assert times["a"][-1] - times["a"][-2] == 10.0


def test_urls_are_normalised_to_host_and_path() -> None:
    assert normalize_url("https://WWW.Example.org/a//b/?q=1#frag") == "example.org/a/b"
    assert normalize_url("http://example.org/a/b") == "example.org/a/b"
    assert normalize_url("http://127.0.0.1:8080/x/") == "127.0.0.1:8080/x"


async def test_a_round_skips_and_counts_what_it_cannot_read(
    hostile: CorpusServer, tmp_path: Path
) -> None:
    hostile.search_results = {
        "bees": [
            "/bees/colony-losses",
            "/bees/varroa",
            "/bees/pesticides",
            "/bees/europe",
            "/bees/queens/?utm=1",  # the same source as /bees/queens once normalised
        ],
        "more bees": ["/bees/honey", "/bees/queens"],
    }
    researcher = ScriptedResearcher(angles=[("bees", "bees"), ("more", "more bees")])
    config = web_config(hostile, tmp_path, fetch_timeout=1.0, max_page_bytes=100_000)
    definition = deep_research_background(config, llm=researcher.llm())
    async with BackgroundDriver(definition, timeout=30) as driver:
        await driver.say("Research bees. Just start.")
        end = await round_end(driver)
        run = driver.result()
    assert end["phase"] == st.DONE
    assert end["sources_read"] == 2, run.silent
    assert "I read 2 sources and found 2 claims to check (4 sources could not be read)." in (
        run.spoken
    )
    skipped = next(n for n in run.silent if n.startswith("Skipped 4 sources"))
    for reason in ("HTTP 404", "timed out after 1 s", "too large", "disallowed by robots.txt"):
        assert reason in skipped
    assert hostile.requested("/bees/queens") == 1
    report = Path(end["last_report"]).read_text()  # noqa: ASYNC240
    assert "sources skipped: 4" in report


def test_limits_parse_with_clear_errors() -> None:
    limits = ResearchLimits.parse("max_sources=12, page_chars=6000, fetch_timeout=2.5")
    assert (limits.max_sources, limits.page_chars, limits.fetch_timeout) == (12, 6000, 2.5)
    with pytest.raises(ValueError, match="'sources=3' is not NAME=VALUE with a known NAME"):
        ResearchLimits.parse("sources=3")
    with pytest.raises(ValueError, match="max_sources='many' is not a number"):
        ResearchLimits.parse("max_sources=many")
    with pytest.raises(ValueError, match="max_sources must be a positive number"):
        ResearchLimits.parse("max_sources=0")
