"""Release hygiene: the SDK and every plugin build wheels and sdists that install and run.

The distributions are built with hatchling (as ``make dist`` does), installed into a
fresh virtual environment that sees the third-party dependencies of the dev venv but
none of backline's own code, and used there, outside the checkout: ``backline plugins
--json``, a scripted conversation, and the no-key try-out of every first-party
background and of a new plugin (``backline try``, the scripts shipped in the wheels).
Offline: nothing is fetched.
"""

from __future__ import annotations

import fnmatch
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
from typing import Any

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


# -- the release path (docs/releasing.md) ------------------------------------------------------


def test_twine_accepts_every_distribution(dist: Path) -> None:
    files = sorted(dist.iterdir())
    assert len(files) == 2 * len(PROJECTS)  # a wheel and an sdist each
    out = _run(sys.executable, "-m", "twine", "check", "--strict", *files)
    assert out.count("PASSED") == len(files), out


def test_versions_agree_and_every_plugin_installs_with_this_sdk(dist: Path) -> None:
    sdk = re.search(r'__version__ = "(.+)"', (ROOT / "sdk/backline/_version.py").read_text())
    assert sdk is not None
    for project in PROJECTS:
        meta = _pyproject(project)["project"]
        assert isinstance(meta, dict)
        version = sdk.group(1) if project == ROOT else meta["version"]
        assert _wheel_of(dist, project).name.split("-")[1] == version, project.name
        for init in project.glob("backline_*/__init__.py"):  # a package's own __version__
            declared = re.search(r'^__version__ = "(.+)"', init.read_text(), re.M)
            assert declared is None or declared.group(1) == version, init
        for requirement in meta.get("dependencies", []) if project != ROOT else []:
            bound = re.fullmatch(r"backline>=([\d.]+)", requirement)
            if bound is not None:
                floor = tuple(int(n) for n in bound.group(1).split("."))
                assert floor <= tuple(int(n) for n in sdk.group(1).split(".")), project.name


def test_make_release_check_checks_what_make_dist_built() -> None:
    dry = subprocess.run(
        ["make", "-n", "release-check"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert "run make dist first" in dry  # an empty dist/ is an error, not a pass
    assert "twine check --strict dist/*" in dry
    assert "pytest -q tests/test_packaging.py" in dry


def _publish(job: dict[str, Any]) -> dict[str, Any]:
    (step,) = [s for s in job["steps"] if "pypa/gh-action-pypi-publish" in s.get("uses", "")]
    return step  # type: ignore[no-any-return]


def test_the_release_workflow_builds_checks_and_publishes_the_sdk_first(dist: Path) -> None:
    import yaml

    workflow = yaml.safe_load((ROOT / ".github/workflows/release.yml").read_text())
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads `on` as true
    assert triggers["push"]["tags"] == ["v*"]
    assert workflow["permissions"] == {"contents": "read"}  # nothing more by default
    jobs = workflow["jobs"]
    build = [s.get("run", "") for s in jobs["build"]["steps"]]
    assert "make dist" in build and "make release-check" in build
    assert build.index("make dist") < build.index("make release-check")
    (upload,) = [s for s in jobs["build"]["steps"] if "upload-artifact" in s.get("uses", "")]
    assert upload["with"]["path"] == "dist/"
    files = {"publish-sdk": "dist/backline-*", "publish-plugins": "dist/backline_*"}
    assert jobs["publish-sdk"]["needs"] == "build"
    assert jobs["publish-plugins"]["needs"] == "publish-sdk"  # plugins need the SDK first
    for name, pattern in files.items():
        job = jobs[name]
        assert job["permissions"] == {"id-token": "write"}  # trusted publishing, no token
        assert job["environment"]["name"] == "pypi"
        steps = job["steps"]
        (download,) = [s for s in steps if "download-artifact" in s.get("uses", "")]
        assert download["with"]["name"] == upload["with"]["name"]
        assert any(pattern in s.get("run", "") for s in steps)
        publish = _publish(job)
        assert publish["uses"].endswith("@release/v1")
        assert "password" not in publish.get("with", {})
    # The SDK's version is new (the tag names it); an unchanged plugin is skipped.
    assert "skip-existing" not in _publish(jobs["publish-sdk"]).get("with", {})
    assert _publish(jobs["publish-plugins"])["with"]["skip-existing"] is True
    # The two uploads split what `make dist` builds: the SDK's files, then all the rest.
    built = sorted(f.name for f in dist.iterdir())
    sdk, plugins = (
        [f for f in built if fnmatch.fnmatch(f, files[job].removeprefix("dist/"))]
        for job in ("publish-sdk", "publish-plugins")
    )
    assert sorted(sdk + plugins) == built
    assert len(sdk) == 2 and _wheel_of(dist, ROOT).name in sdk  # its wheel and its sdist


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
                ("", r"\[claude_code\] idle, waiting for the next task"),  # its turn ended
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
