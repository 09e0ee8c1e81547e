"""Several instances of one background (issue 30, item 5): ``definition.instance(name,
value)``, ``--background ID[:NAME][=VALUE]`` checked before anything starts, each
instance its own id, value, runtime and state, addressed by name through the generated
tools, and listed by name in the tools and the default instructions."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import click
import pytest
from click.testing import CliRunner

import backline
from backline import Agent, BackgroundContext, BackgroundDefinition, Session, background
from backline.app import (
    SessionOptions,
    available_backgrounds,
    check_options,
    default_instructions,
    prepare_session,
    session_options,
)
from backline.plugins import PluginManager, attach_options
from backline.testing import ScriptedLLM, VirtualClock, text, tool_calls

received: list[tuple[str, str | None, str]] = []


@background(
    "folder",
    description="Works in a folder.",
    instance_value="DIR: the folder it works in",
    voice_instructions="Send folder work to the folder sessions.",
)
async def folder(ctx: BackgroundContext) -> None:
    """An instance without a factory: it reads its value from the context."""
    ctx.set_state({"status": "idle", "folder": ctx.value})
    async for message in ctx.messages():
        received.append((ctx.id, ctx.value, message))
        ctx.set_state({"status": "done", "folder": ctx.value, "last_task": message})


@background("notes", description="Keeps notes.")
async def notes(ctx: BackgroundContext) -> None:
    async for _ in ctx.messages():
        pass


def _described(name: str, value: str | None) -> BackgroundDefinition:
    """A factory: each instance says where it works."""
    if value == "missing":
        raise ValueError("the folder missing does not exist")
    return background(name, description=f"Repo worker in {value}. Edits code.")(folder.entrypoint)


repo = dataclasses.replace(
    background("repo", description="Repo worker.")(folder.entrypoint),
    instance_value="DIR",
    instances=_described,
)


def send_call(background_id: str, content: str) -> tuple[str, dict[str, Any]]:
    return ("backline_send", {"background_session_id": background_id, "content": content})


class Plugin:
    def __init__(self) -> None:
        self.llm = ScriptedLLM()

    @backline.hookimpl
    def register_background_sessions(self, register: Any) -> None:
        for definition in (folder, notes, repo):
            register(definition)

    @backline.hookimpl
    def register_llms(self, register: Any) -> None:
        register("scripted", lambda **options: self.llm)

    @backline.hookimpl
    def register_options(self, register: Any) -> None:
        register(
            "--folder-fast", envvar="FOLDER_FAST", help="Fast.", is_flag=True, background="folder"
        )


@pytest.fixture(autouse=True)
def _fresh() -> None:
    received.clear()


@pytest.fixture
def plugin() -> Plugin:
    return Plugin()


@pytest.fixture
def manager(plugin_manager: PluginManager, plugin: Plugin) -> PluginManager:
    plugin_manager.register(plugin, name="instances")
    return plugin_manager


# -- the definition ---------------------------------------------------------------------
def test_an_instance_is_a_renamed_copy_with_its_value() -> None:
    api = folder.instance("api", "./services/api")
    assert (api.id, api.value, api.instance_of) == ("api", "./services/api", "folder")
    assert api.entrypoint is folder.entrypoint and api.description == folder.description
    assert folder.instance().id == "folder" and folder.instance(value="x").value == "x"
    # An instance of an instance is still an instance of the plugin's background.
    assert api.instance("web", "./web").instance_of == "folder"
    assert (folder.value, folder.instance_of) == (None, None)


def test_a_factory_builds_each_instance_and_may_refuse_its_value() -> None:
    api = repo.instance("api", "./services/api")
    assert api.description == "Repo worker in ./services/api. Edits code."
    assert (api.id, api.value, api.instance_of) == ("api", "./services/api", "repo")
    with pytest.raises(ValueError, match="missing does not exist"):
        repo.instance("web", "missing")


@pytest.mark.parametrize(
    ("definition", "name", "value", "error", "match"),
    [
        (notes, "a", "x", ValueError, "background 'notes' takes no value"),
        (folder, "a b", None, ValueError, "may use only letters"),
        (folder, "", None, ValueError, "must be non-empty"),
        (folder, "a", "  ", ValueError, "non-blank"),
    ],
)
def test_an_instance_refuses_a_bad_name_or_value(
    definition: BackgroundDefinition, name: str, value: str | None, error: type, match: str
) -> None:
    with pytest.raises(error, match=match):
        definition.instance(name, value)


def test_a_definition_checks_its_instance_fields() -> None:
    with pytest.raises(ValueError, match="instance_value"):
        background("x", description="x", instance_value=" ")(folder.entrypoint)
    with pytest.raises(TypeError, match="instances must be a function"):
        dataclasses.replace(folder, instances="nope")  # type: ignore[arg-type]
    broken = dataclasses.replace(folder, instances=lambda name, value: "nope")  # type: ignore[arg-type,return-value]
    with pytest.raises(TypeError, match="must return a BackgroundDefinition"):
        broken.instance("a")


# -- --background ID[:NAME][=VALUE] -------------------------------------------------------
def test_the_options_choose_instances_in_order(manager: PluginManager) -> None:
    chosen = check_options(
        manager,
        SessionOptions(
            backgrounds=("folder:api=./services/api", "folder:web=./web", "notes", "repo=x=y:z"),
            llm="scripted",
        ),
    )
    assert [(d.id, d.value, d.instance_of) for d in chosen] == [
        ("api", "./services/api", "folder"),
        ("web", "./web", "folder"),
        ("notes", None, None),
        ("repo", "x=y:z", "repo"),  # the value keeps its ':' and '='
    ]
    assert chosen[2] is notes  # a plain ID is the plugin's own definition, as before


@pytest.mark.parametrize(
    ("backgrounds", "message"),
    [
        (("folder:api=a", "folder:api=b"), "two backgrounds are named 'api' (folder:api=a and "),
        (("notes", "notes"), "two backgrounds are named 'notes'"),
        (("folder:notes", "notes"), "two backgrounds are named 'notes'"),
        (("notes:a=x",), "notes:a=x: background 'notes' takes no value"),
        (("fodler:api=x",), "Did you mean 'folder'?"),
        (("folder:",), "has an empty NAME after ':'"),
        (("folder:a=",), "has an empty VALUE after '='"),
        ((":a",), "names no background"),
        (("folder:a b",), "may use only letters"),
        (("repo:api=missing",), "repo:api=missing: the folder missing does not exist"),
    ],
)
def test_bad_background_values_fail_before_anything_starts(
    manager: PluginManager, backgrounds: tuple[str, ...], message: str
) -> None:
    with pytest.raises(click.BadParameter) as bad:
        check_options(manager, SessionOptions(backgrounds=backgrounds, llm="scripted"))
    assert bad.value.param_hint == "'--background'"
    assert message in str(bad.value)


def test_a_front_end_says_what_is_wrong_and_takes_a_plugin_option_for_an_instance(
    manager: PluginManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FOLDER_FAST", raising=False)

    @click.command()
    @session_options
    def command(session_options: SessionOptions) -> None:
        prepare_session(manager, session_options)
        click.echo("session built")

    attach_options(command, manager.options())
    run = CliRunner()
    base = ["--llm", "scripted", "--no-log"]
    ok = run.invoke(
        command, [*base, "-b", "folder:api=./a", "-b", "folder:web=./b", "--folder-fast"]
    )
    assert ok.exit_code == 0, ok.output
    assert "session built" in ok.output
    bad = run.invoke(command, [*base, "-b", "notes:a=x"])
    assert bad.exit_code == 2 and "session built" not in bad.output
    assert "Invalid value for '--background': notes:a=x: background 'notes' takes no value" in (
        " ".join(bad.output.split())
    )


def test_the_listing_says_which_background_takes_a_value(manager: PluginManager) -> None:
    lines = available_backgrounds(manager).splitlines()
    assert "  folder: Works in a folder. (=DIR: the folder it works in)" in lines
    assert "  notes: Keeps notes." in lines


# -- in a session ---------------------------------------------------------------------------
async def test_two_instances_are_addressed_by_name_and_each_gets_its_message(
    manager: PluginManager, plugin: Plugin, virtual_clock: VirtualClock
) -> None:
    plugin.llm.push(
        tool_calls(send_call("api", "fix the tests"), send_call("web", "bump the version")),
        text("Passed on to both."),
    )
    options = SessionOptions(backgrounds=("folder:api=./services/api", "folder:web=./web"))
    session, agent = prepare_session(manager, dataclasses.replace(options, llm="scripted"))
    async with session:
        await session.start(agent)
        assert session.background is not None
        assert session.background.sorted_ids() == ["api", "web"]
        await session.run(user_input="tell api to fix the tests and web to bump the version")
        await asyncio.sleep(0.1)
        assert sorted(received) == [
            ("api", "./services/api", "fix the tests"),
            ("web", "./web", "bump the version"),
        ]
        api, web = (session.background.context(i) for i in ("api", "web"))
        assert api.state["folder"] == "./services/api" and web.state["folder"] == "./web"
        assert api.state["last_task"] == "fix the tests"
    # The voice model saw both, by name, in its tools and in its instructions.
    request = plugin.llm.requests[0]
    (send,) = [t for t in request.tools if t.name == "backline_send"]
    assert "- api: Works in a folder." in send.description
    assert "- web: Works in a folder." in send.description
    assert "- api: Works in a folder." in agent.instructions
    assert "tell the api agent to stop" in agent.instructions
    assert agent.instructions.count("Send folder work to the folder sessions.") == 1


def test_default_instructions_list_several_backgrounds_by_name() -> None:
    api, web = repo.instance("api", "./services/api"), repo.instance("web", "./web")
    text_ = default_instructions([api, web])
    assert "- api: Repo worker in ./services/api.\n- web: Repo worker in ./web." in text_
    assert "Several background sessions run" not in default_instructions([api])


async def test_an_instance_in_a_session_built_by_hand(virtual_clock: VirtualClock) -> None:
    llm = ScriptedLLM([tool_calls(send_call("b", "hello b")), text("Sent.")])
    a, b = folder.instance("a", "one"), folder.instance("b", "two")
    async with Session(llm, background=[a, b]) as session:
        await session.start(Agent("Help."))
        await session.run(user_input="say hello to b")
        await asyncio.sleep(0.1)
    assert received == [("b", "two", "hello b")]
