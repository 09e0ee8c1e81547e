"""The fetcher refuses private addresses (issue 25, item 1): loopback, RFC 1918 and
RFC 4193, link-local (the cloud metadata service), multicast, unspecified and
reserved, IPv4 and IPv6, mapped forms included; on the address it connects to, at
every redirect hop; a refused source is skipped and named; an option allows an
intranet.

No packet leaves the machine: names resolve through ``FakeNetwork``, whose connector
fails the test if it is ever asked for a refused address and reaches the "public"
address only by connecting to the corpus server on 127.0.0.1.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import httpcore
import pytest
from backline_deep_research import (
    Fetcher,
    FetchError,
    ResearchConfig,
    ResearchLimits,
    deep_research_background,
)
from backline_deep_research import state as st
from backline_deep_research.hosts import Network
from backline_deep_research.search import SearchResult
from backline_deep_research.testing import (
    CorpusPage,
    CorpusServer,
    ScriptedResearcher,
    redirect,
)

from backline.testing import BackgroundDriver

from .conftest import FAST, round_end
from .corpus import PAGES

PUBLIC = "93.184.216.34"
"""The one "public" address: the fake network routes it to the corpus server."""
SECRET = CorpusPage("/secret", "Admin console", ("The admin password is 7 hunter2 swordfish.",))

REFUSED = [
    ("127.0.0.1", "loopback"),
    ("127.8.9.10", "loopback"),
    ("10.1.2.3", "private"),
    ("172.16.5.4", "private"),
    ("192.168.1.1", "private"),
    ("169.254.169.254", "link-local"),
    ("100.64.0.1", "non-public"),
    ("0.0.0.0", "unspecified"),
    ("224.0.0.251", "multicast"),
    ("240.0.0.1", "reserved"),
    ("255.255.255.255", "reserved"),
    ("::1", "loopback"),
    ("::", "unspecified"),
    ("fe80::1", "link-local"),
    ("fc00::1", "private"),
    ("fd12:3456:789a::1", "private"),
    ("fec0::1", "site-local"),
    ("ff02::1", "multicast"),
    ("2001:db8::1", "private"),
    ("::ffff:127.0.0.1", "loopback (IPv4 127.0.0.1 inside IPv6)"),
    ("::ffff:10.0.0.1", "private (IPv4 10.0.0.1 inside IPv6)"),
    ("::ffff:169.254.169.254", "link-local (IPv4 169.254.169.254 inside IPv6)"),
    ("::127.0.0.1", "reserved"),
    ("64:ff9b::a9fe:a9fe", "link-local (IPv4 169.254.169.254 inside IPv6)"),
    ("2002:7f00:1::1", "loopback (IPv4 127.0.0.1 inside IPv6)"),
]


class FakeNetwork:
    """Names from ``names``; connections only to ``PUBLIC`` (routed to ``port`` on
    127.0.0.1) and, when ``loopback`` is set, to 127.0.0.1 itself. Any other
    connection is recorded in ``forbidden`` and fails."""

    def __init__(self, port: int, names: dict[str, Any], *, loopback: bool = False) -> None:
        self.port = port
        self.names = names
        self.loopback = loopback
        self.resolved: list[str] = []
        self.connected: list[str] = []
        self.forbidden: list[str] = []

    def network(self) -> Network:
        return Network(resolve=self.resolve, connect=self.connect)

    async def resolve(self, host: str, port: int) -> Sequence[str]:
        self.resolved.append(host)
        answer = self.names[host]
        addresses: Sequence[str] = answer() if callable(answer) else answer
        return addresses

    async def connect(
        self, address: str, port: int, timeout: float | None
    ) -> httpcore.AsyncNetworkStream:
        if address == PUBLIC or (self.loopback and address == "127.0.0.1"):
            self.connected.append(address)
            backend = httpcore.AnyIOBackend()
            return await backend.connect_tcp("127.0.0.1", self.port, timeout=timeout)
        self.forbidden.append(address)
        raise AssertionError(f"the fetcher tried to connect to {address}")


@pytest.fixture
async def web() -> AsyncIterator[CorpusServer]:
    async with CorpusServer([*PAGES, SECRET]) as server:
        yield server


def fetcher_for(network: FakeNetwork | None, *, allow: bool = False) -> Fetcher:
    limits = FAST.with_(fetch_timeout=5.0)
    client = Fetcher.make_client(
        limits, allow_private_hosts=allow, network=network.network() if network else None
    )
    return Fetcher(client, limits)


async def fetch(fetcher: Fetcher, url: str) -> Any:
    try:
        return await fetcher.fetch(url)
    finally:
        await fetcher.aclose()
        await fetcher.client.aclose()


@pytest.mark.parametrize(("address", "why"), REFUSED, ids=[a for a, _ in REFUSED])
async def test_a_name_that_resolves_to_a_private_address_is_refused_before_connecting(
    web: CorpusServer, address: str, why: str
) -> None:
    net = FakeNetwork(web.port, {"target.test": [address]})
    with pytest.raises(FetchError) as refused:
        await fetch(fetcher_for(net), "http://target.test/secret")
    assert str(refused.value) == (
        f"refused: target.test resolves to {address}, a {why} address (private addresses "
        "are not fetched; --research-allow-private-hosts allows them)"
    )
    assert net.resolved == ["target.test"]  # resolved once (robots.txt's connection) ...
    assert net.forbidden == [] and net.connected == []  # ... and never connected
    assert web.requests == []


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]/secret",
        "http://[::ffff:7f00:1]/secret",
        "http://0.0.0.0/secret",
        "http://10.0.0.8:8080/secret",
    ],
)
async def test_an_address_in_the_url_is_refused_without_resolving(url: str) -> None:
    net = FakeNetwork(0, {})
    with pytest.raises(FetchError, match=r"^refused: \S+, a [a-z-]+ .*address"):
        await fetch(fetcher_for(net), url)
    assert net.resolved == [] and net.forbidden == []


async def test_loopback_is_refused_on_the_real_network_and_read_when_allowed(
    web: CorpusServer,
) -> None:
    # The system resolver and real connections (all on this machine): by default
    # neither 127.0.0.1 nor localhost is read, and the server sees no request ...
    for url in (web.page_url("/secret"), f"http://localhost:{web.port}/secret"):
        with pytest.raises(FetchError, match="a loopback address"):
            await fetch(fetcher_for(None), url)
    assert web.requests == []
    # ... and with the option on, it is (an intranet can be researched).
    page = await fetch(fetcher_for(None, allow=True), web.page_url("/secret"))
    assert "The admin password is 7 hunter2 swordfish." in page.text


async def test_a_public_address_is_connected_to_and_read(web: CorpusServer) -> None:
    net = FakeNetwork(web.port, {"bees.test": [PUBLIC]})
    page = await fetch(fetcher_for(net), "http://bees.test/bees/queens")
    assert page.title == "Queen bees"
    assert net.connected == [PUBLIC, PUBLIC]  # robots.txt, then the page
    assert net.forbidden == []


async def test_a_name_with_any_private_address_is_refused_as_a_whole(web: CorpusServer) -> None:
    net = FakeNetwork(web.port, {"mixed.test": [PUBLIC, "10.0.0.9"]})
    with pytest.raises(FetchError, match=r"mixed\.test resolves to 10\.0\.0\.9, a private"):
        await fetch(fetcher_for(net), "http://mixed.test/bees/queens")
    assert net.connected == [] and web.requests == []


async def test_every_redirect_hop_is_checked(web: CorpusServer) -> None:
    names = {"public.test": [PUBLIC], "metadata.test": ["169.254.169.254"]}
    net = FakeNetwork(web.port, names)
    web.routes["/to-metadata"] = redirect("http://metadata.test/latest/meta-data/")
    web.routes["/to-loopback"] = redirect(f"http://127.0.0.1:{web.port}/secret")
    web.routes["/to-mapped"] = redirect(f"http://[::ffff:127.0.0.1]:{web.port}/secret")
    reasons = []
    for path in ("/to-metadata", "/to-loopback", "/to-mapped"):
        with pytest.raises(FetchError) as refused:
            await fetch(fetcher_for(net), f"http://public.test{path}")
        reasons.append(str(refused.value))
        assert web.requested(path) == 1  # the public hop was read ...
    assert reasons[0].startswith("refused: metadata.test resolves to 169.254.169.254, a link-")
    assert reasons[1].startswith("refused: 127.0.0.1, a loopback address")
    assert reasons[2].startswith("refused: ::ffff:127.0.0.1, a loopback (IPv4 127.0.0.1")
    assert web.requested("/secret") == 0  # ... the private one never asked for
    assert net.forbidden == [] and set(net.connected) == {PUBLIC}


async def test_a_name_that_rebinds_is_checked_at_each_connection(web: CorpusServer) -> None:
    # A hostile DNS answers a public address first (robots.txt), then loopback: the
    # page's connection is checked on what it would connect to, and refused.
    answers = iter([[PUBLIC], ["127.0.0.1"]])
    net = FakeNetwork(web.port, {"rebind.test": lambda: next(answers)})
    with pytest.raises(FetchError, match=r"rebind\.test resolves to 127\.0\.0\.1, a loopback"):
        await fetch(fetcher_for(net), "http://rebind.test/secret")
    assert net.resolved == ["rebind.test", "rebind.test"]
    assert net.connected == [PUBLIC] and net.forbidden == []
    assert web.requested("/secret") == 0


class Planted:
    """A search provider whose results point at private hosts (and one public page)."""

    def __init__(self, urls: list[str]) -> None:
        self.urls = urls

    async def search(self, query: str, *, max_results: int) -> list[SearchResult]:
        return [SearchResult(title=url, url=url) for url in self.urls]

    async def aclose(self) -> None:
        return None


async def test_a_round_skips_names_and_counts_refused_sources(
    web: CorpusServer, tmp_path: Path
) -> None:
    names = {"bees.test": [PUBLIC], "intranet.test": ["10.20.30.40"]}
    net = FakeNetwork(web.port, names)
    urls = [
        f"http://127.0.0.1:{web.port}/secret",
        "http://169.254.169.254/latest/meta-data/",
        "http://intranet.test/secret",
        "http://bees.test/bees/queens",
    ]
    config = ResearchConfig(
        search="planted", report_dir=tmp_path, limits=FAST, network=net.network()
    )
    researcher = ScriptedResearcher()
    definition = deep_research_background(
        config, llm=researcher.llm(), search=lambda _: Planted(urls)
    )
    async with BackgroundDriver(definition, timeout=30) as driver:
        await driver.say("Research queen bees. Just start.")
        end = await round_end(driver)
        run = driver.result()
    assert end["phase"] == st.DONE and end["sources_read"] == 1
    assert "I read 1 sources and found 1 claims to check (3 sources could not be read)." in (
        run.spoken
    )
    skipped = next(n for n in run.silent if n.startswith("Skipped 3 sources"))
    assert f"http://127.0.0.1:{web.port}/secret (refused: 127.0.0.1, a loopback" in skipped
    assert "http://169.254.169.254/latest/meta-data/ (refused: 169.254.169.254, a link" in skipped
    assert "http://intranet.test/secret (refused: intranet.test resolves to 10.20.30.40" in skipped
    report = Path(end["last_report"]).read_text()  # noqa: ASYNC240
    assert "hunter2" not in report and "sources skipped: 3" in report
    assert "hunter2" not in "\n".join(text for _, text in researcher.requests)
    assert web.requested("/secret") == 0
    assert net.forbidden == []


def test_the_option_is_read_from_the_environment() -> None:
    var = "BACKLINE_RESEARCH_ALLOW_PRIVATE_HOSTS"
    assert ResearchConfig.from_env({}).allow_private_hosts is False
    assert ResearchConfig.from_env({var: "1"}).allow_private_hosts is True
    assert ResearchConfig.from_env({var: "0"}).allow_private_hosts is False
    with pytest.raises(ValueError, match=f"{var}: 'maybe' is not 1 or 0"):
        ResearchConfig.from_env({var: "maybe"})
    assert ResearchLimits() == ResearchConfig.from_env({var: "yes"}).limits
