"""Release hygiene: the SDK and every plugin build wheels and sdists that install and run.

The distributions are built with hatchling (as ``make dist`` does), installed into a
fresh virtual environment that sees the third-party dependencies of the dev venv but
none of backline's own code, and used there, outside the checkout: ``backline plugins
--json``, a scripted conversation, and the no-key try-out of every first-party
background and of a new plugin (``backline try``, the scripts shipped in the wheels).
Offline: nothing is fetched.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pexpect
import pytest

ROOT = Path(__file__).resolve().parents[1]
PROJECTS = [ROOT, *sorted(p.parent for p in (ROOT / "plugins").glob("*/pyproject.toml"))]
TIMEOUT = 180


def _pyproject(project: Path) -> dict[str, object]:
    return tomllib.loads((project / "pyproject.toml").read_text())


def _run(*args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, f"{args} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    for project in PROJECTS:
        _run(sys.executable, "-m", "hatchling", "build", "-d", out, cwd=project)
    return out


def _wheel_of(dist: Path, project: Path) -> Path:
    name = re.sub(r"[-_.]+", "_", str(_pyproject(project)["project"]["name"]))  # type: ignore[index]
    (wheel,) = dist.glob(f"{name}-*.whl")
    return wheel


@pytest.mark.parametrize("project", PROJECTS, ids=[p.name for p in PROJECTS])
def test_each_distribution_has_metadata_a_license_and_type_information(
    project: Path, dist: Path
) -> None:
    meta = _pyproject(project)["project"]
    assert isinstance(meta, dict)
    assert meta.get("license") == "MIT"
    assert (project / "LICENSE").is_file(), f"{project.name}: no LICENSE file"
    assert meta.get("urls"), f"{project.name}: no [project.urls]"
    if project != ROOT:
        backline = [d for d in meta["dependencies"] if re.match(r"backline\b(?!-)", d)]
        assert backline and ">=" in backline[0], f"{project.name}: depend on backline>=0.1"
    with zipfile.ZipFile(_wheel_of(dist, project)) as wheel:
        names = wheel.namelist()
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    packages = {n.split("/")[0] for n in names if n.endswith("/__init__.py") and n.count("/") == 1}
    for package in packages:
        assert f"{package}/py.typed" in names, f"{package}: no py.typed in the wheel"


def test_the_sdk_wheel_carries_its_data_files(dist: Path) -> None:
    with zipfile.ZipFile(_wheel_of(dist, ROOT)) as wheel:
        names = set(wheel.namelist())
    for data in (
        "backline/io/web/static/index.html",
        "backline/io/web/static/app.js",
        "backline/plugins/template/plugin.py.tmpl",
        "backline/plugins/template/gitignore.tmpl",
        "backline/plugins/template/patterns.py.tmpl",
        "backline/testing/offline.py",
    ):
        assert data in names


def test_the_package_index_gets_the_readme_with_absolute_links(dist: Path) -> None:
    """README.md links relatively (for a clone); the metadata's copy, shown on the package
    index, links to the repository, and every link into it names a file that exists."""
    import email

    with zipfile.ZipFile(_wheel_of(dist, ROOT)) as wheel:
        (name,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = email.message_from_bytes(wheel.read(name))
    assert metadata["Description-Content-Type"] == "text/markdown"
    description = metadata.get_payload()
    assert isinstance(description, str) and "## Try it with no key" in description
    source = str(_pyproject(ROOT)["project"]["urls"]["Source"])  # type: ignore[index]
    raw = source.replace("https://github.com/", "https://raw.githubusercontent.com/")
    own = (f"{source}/blob/main/", f"{raw}/main/")
    text = re.sub(r"^```.*?^```", "", description, flags=re.S | re.M)  # code is not links
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    assert len(links) > 20
    for target in links:
        assert target.startswith(("https://", "http://", "#")), f"{target} is relative"
        prefix = next((p for p in own if target.startswith(p)), None)
        if prefix is not None:
            assert (ROOT / target[len(prefix) :].split("#")[0]).exists(), target


def test_an_sdist_builds_the_same_wheel(dist: Path, tmp_path: Path) -> None:
    for project in PROJECTS:
        wheel = _wheel_of(dist, project)
        (sdist,) = dist.glob(wheel.name.split("-")[0] + "-*.tar.gz")
        with tarfile.open(sdist) as archive:
            archive.extractall(tmp_path, filter="data")
        (unpacked,) = [p for p in tmp_path.iterdir() if p.name == sdist.name[: -len(".tar.gz")]]
        out = tmp_path / f"from-{unpacked.name}"
        _run(sys.executable, "-m", "hatchling", "build", "-t", "wheel", "-d", out, cwd=unpacked)
        (rebuilt,) = out.glob("*.whl")
        with zipfile.ZipFile(wheel) as a, zipfile.ZipFile(rebuilt) as b:
            assert sorted(a.namelist()) == sorted(b.namelist()), project.name


@pytest.fixture(scope="module")
def fresh_python(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new venv with the built wheels; third-party packages come from a filtered view
    of the dev venv that holds none of backline's own distributions."""
    root = tmp_path_factory.mktemp("fresh")
    _run(sys.executable, "-m", "venv", "--without-pip", root / "venv")
    python = root / "venv" / "bin" / "python"
    view = root / "third-party"
    view.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        lowered = entry.name.lower()
        if lowered.startswith(("backline", "_editable_impl_backline", "__editable__")):
            continue
        (view / entry.name).symlink_to(entry)
    purelib = _run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    (Path(purelib.strip()) / "_third_party.pth").write_text(
        f"import site; site.addsitedir({str(view)!r})\n"
    )
    wheels = sorted(dist.glob("*.whl"))
    _run(
        sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index",
        "--disable-pip-version-check", *wheels,
    )  # fmt: skip
    return python


def _fresh_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BACKLINE_", "ANTHROPIC_"))}
    env.pop("PYTHONPATH", None)
    env["HOME"] = str(tmp_path)
    return env


def test_the_wheels_install_and_list_their_plugins(fresh_python: Path, tmp_path: Path) -> None:
    code = "import backline, backline_claude_code as c; print(backline.__file__, c.__file__)"
    where = _run(fresh_python, "-c", code, env=_fresh_env(tmp_path))
    venv = fresh_python.parent.parent
    assert all(Path(p).is_relative_to(venv) for p in where.split()), where
    listed = json.loads(
        _run(venv / "bin" / "backline", "plugins", "--json", "--all", env=_fresh_env(tmp_path))
    )
    status = {p["name"]: p["status"] for p in listed}
    assert status["anthropic"] == "loaded"
    assert status["claude_code"] == "loaded"
    assert all(s == "loaded" for s in status.values()), status


CONVERSATION = """
import asyncio
from backline import Agent, Session, function_tool
from backline.testing import ScriptedLLM, text, tool_calls


@function_tool
async def weather(city: str) -> str:
    '''Get the weather.'''
    return f"Sunny in {city}."


async def main() -> None:
    llm = ScriptedLLM([tool_calls(("weather", {"city": "Oslo"})), text("It's sunny in Oslo.")])
    async with Session(llm, tools=[weather]) as session:
        await session.start(Agent("Be brief."))
        result = await session.run(user_input="Weather in Oslo?")
    print(result.final_output)


asyncio.run(main())
"""


def test_a_scripted_conversation_runs_from_the_wheels(fresh_python: Path, tmp_path: Path) -> None:
    script = tmp_path / "conversation.py"
    script.write_text(CONVERSATION)
    assert _run(fresh_python, script, env=_fresh_env(tmp_path)).strip() == "It's sunny in Oslo."


# -- the no-key try-out, from the wheels, outside the checkout -----------------------------------


def _try(venv_bin: Path, tmp_path: Path, *args: str) -> pexpect.spawn:
    cwd = tmp_path / "elsewhere"
    cwd.mkdir(exist_ok=True)
    return pexpect.spawn(
        str(venv_bin / "backline"),
        ["try", *args, "--plain"],
        env=_fresh_env(tmp_path),
        cwd=str(cwd),
        encoding="utf-8",
        timeout=90,
    )


def _converse(child: pexpect.spawn, *turns: tuple[str, str]) -> None:
    """Each turn: type the line (unless empty), then wait for the answer."""
    try:
        child.expect("/quit or Ctrl-D")
        for line, answer in turns:
            if line:
                child.sendline(line)
            child.expect(answer)
        child.sendline("/quit")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0


@pytest.mark.timeout(240)
@pytest.mark.parametrize(
    ("background", "turns"),
    [
        (
            "claude_code",
            [
                ("ask claude to add a README", "Update from Claude Code: I wrote the task"),
                ("what is it doing?", "agent: Claude Code is idle"),
            ],
        ),
        (
            "deep_research",
            [
                (
                    "are night trains coming back in Europe?",
                    r"The full report is saved as \S+\.md",
                ),
                ("status?", "agent: The research is done"),
            ],
        ),
        (
            "cli_agent",
            [("ask the agent to fix the parser", "Update from the agent: I got the task")],
        ),
    ],
)
def test_each_first_party_background_can_be_tried_with_no_key(
    fresh_python: Path, tmp_path: Path, background: str, turns: list[tuple[str, str]]
) -> None:
    child = _try(fresh_python.parent, tmp_path, background)
    child.expect(f"answers from the {background} script")
    _converse(child, *turns)


@pytest.mark.timeout(240)
def test_a_new_plugin_can_be_tried_with_no_key(fresh_python: Path, tmp_path: Path) -> None:
    """``backline new-plugin weather``, its tests, then ``backline try weather``: the
    generic script drives it through its tools."""
    venv_bin = fresh_python.parent
    env = _fresh_env(tmp_path)
    _run(venv_bin / "backline", "new-plugin", "weather", "--dir", tmp_path, env=env)
    package = tmp_path / "backline-weather"
    _run(
        sys.executable, "-m", "pip", "--python", fresh_python, "install", "--no-deps",
        "--no-index", "--no-build-isolation", "--disable-pip-version-check", package,
    )  # fmt: skip
    tested = _run(
        fresh_python, "-m", "pytest", "-q", "-p", "no:cacheprovider", cwd=package, env=env
    )
    assert "4 passed" in tested
    child = _try(venv_bin, tmp_path, "weather")
    child.expect("answers from the generic script")
    _converse(
        child,
        ("Paris", "agent: I've passed that on to Weather"),
        ("", "Update from Weather: Finished: Paris"),
        ("status?", r"agent: Weather is done \(task: Paris\)"),
    )
