"""What the deploy tests read: the Dockerfile's stages and their ``pip install`` lines, a virtualenv installed
the same way, and the compose file with its variables resolved as ``docker compose`` resolves them."""

from __future__ import annotations

import fcntl
import hashlib
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
COMPOSE = ROOT / "docker-compose.yml"
#: one virtualenv per Dockerfile stage, kept between runs while what it was installed from is unchanged
VENVS = ROOT / "build" / "deploy-venvs"


@dataclass
class Stage:
    name: str
    base: str  # the FROM image, or the stage it starts from
    workdir: str = "/"
    pip: list[list[str]] = field(default_factory=list)  # the requirement arguments of each `pip install`
    args: dict[str, str] = field(default_factory=dict)  # ARG defaults of this stage

    @property
    def python(self) -> str | None:
        """``3.11`` for ``python:3.11-slim-bookworm``, None for an image that is not the Python one."""
        m = re.fullmatch(r"(?:docker\.io/)?(?:library/)?python:(\d+\.\d+)[\w.-]*", self.base)
        return m.group(1) if m else None


def dockerfile_stages(text: str) -> dict[str, Stage]:
    """The stages of a Dockerfile by name, each with what it inherits from the stage it starts from."""
    stages: dict[str, Stage] = {}
    current: Stage | None = None
    for line in re.sub(r"\\\n", " ", text).splitlines():
        words = line.strip().split(None, 1)
        if not words or words[0].startswith("#"):
            continue
        instruction, rest = words[0].upper(), (words[1] if len(words) > 1 else "")
        if instruction == "FROM":
            m = re.fullmatch(r"(?:--\S+\s+)*(\S+)(?:\s+AS\s+(\S+))?", rest.strip(), re.IGNORECASE)
            if m is None:
                raise ValueError(f"Dockerfile: cannot read FROM {rest!r}")
            image, name = m.group(1), m.group(2) or f"stage-{len(stages)}"
            parent = stages.get(image)
            current = Stage(name, parent.base if parent else image, parent.workdir if parent else "/",
                            [list(p) for p in parent.pip] if parent else [])
            stages[name] = current
        elif current is None:
            continue
        elif instruction == "ARG" and "=" in rest:
            name, _, default = rest.strip().partition("=")
            current.args[name] = shlex.split(default)[0] if default else ""
        elif instruction == "WORKDIR":
            current.workdir = str(pathlib.PurePosixPath(current.workdir, rest.strip()))
        elif instruction == "RUN":
            for command in re.split(r"&&|;", rest):
                # An ARG's default stands for its $NAME / ${NAME}, as a build without --build-arg has it.
                defaults = current.args
                args = [re.sub(r"\$\{?(\w+)\}?", lambda m, d=defaults: d.get(m.group(1), m.group(0)), a)
                        for a in shlex.split(command)]
                if "pip" in " ".join(args[:3]) and "install" in args:
                    after = args[args.index("install") + 1:]
                    current.pip.append([a for a in after if not a.startswith("-")])
    return stages


def without_cargo(env: dict[str, str]) -> dict[str, str]:
    """``env`` with every PATH folder holding ``cargo`` left out: the images are built without it."""
    folders = [d for d in env.get("PATH", "").split(os.pathsep) if d and not (pathlib.Path(d) / "cargo").exists()]
    return {**env, "PATH": os.pathsep.join(folders)}


def uv() -> str:
    found = shutil.which("uv", path=str(pathlib.Path(sys.executable).parent)) or shutil.which("uv")
    if found is None:
        raise AssertionError("uv is not installed; it is a dev dependency: run make setup")
    return found


def source_digest() -> str:
    """What the install of ``.`` is made from: every file git tracks or would track, by content."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, check=True).stdout.split(b"\0")
    digest = hashlib.sha256()
    for name in sorted(f for f in files if f):
        path = ROOT / name.decode()
        if path.is_file():
            digest.update(name + b"\0" + path.read_bytes())
    return digest.hexdigest()


def uv_install(venv: pathlib.Path, args: list[str], env: dict[str, str], what: str) -> None:
    """``uv pip install args`` into ``venv``, from uv's cache first: online, uv revalidates PySpark's source release
    and builds its 450 MB wheel again (about 90 s here); the index is asked only for what the cache does not hold.
    AssertionError with uv's words, naming ``what`` the environment is for."""
    install = [uv(), "pip", "install", "-q", "--python", str(venv / "bin" / "python"), *args]
    (ROOT / "build").mkdir(exist_ok=True)
    # One build of the worktree at a time: `make test` runs the main tests (the Dockerfile stages) and the 3.5
    # stage (the cluster job's environment) at once, and setuptools builds in the worktree's build/ folder.
    with open(ROOT / "build" / ".source-build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        run = subprocess.run([*install, "--offline"], env=env, capture_output=True, text=True, check=False)
        if run.returncode != 0:
            run = subprocess.run(install, env=env, capture_output=True, text=True, check=False)
    if run.returncode != 0:
        raise AssertionError(f"uv pip install {' '.join(args)} ({what}) failed:\n{run.stderr[-3000:]}")


def stage_venv(stage: Stage) -> pathlib.Path:
    """A virtualenv installed as ``stage`` installs the image: its ``pip install`` lines, run by uv with the
    stage's Python minor version, from the worktree (``.`` is the WORKDIR the source is copied to), without
    cargo. Remade when the install lines or pyproject.toml change; lineagewire is reinstalled when a file of
    the worktree changed since."""
    if not stage.pip:
        raise AssertionError(f"Dockerfile stage {stage.name} has no pip install line")
    VENVS.mkdir(parents=True, exist_ok=True)
    venv = VENVS / stage.name
    spec_key = hashlib.sha256(repr((stage.base, stage.pip)).encode() + (ROOT / "pyproject.toml").read_bytes())
    source_key = source_digest()
    env = without_cargo({**os.environ, "UV_PYTHON_DOWNLOADS": "never"})
    env.pop("VIRTUAL_ENV", None)
    with open(VENVS / f".{stage.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two test runs in one worktree take turns
        spec_file, source_file = venv / ".lineagewire-spec", venv / ".lineagewire-source"
        fresh = not (spec_file.exists() and spec_file.read_text() == spec_key.hexdigest())
        if fresh:
            shutil.rmtree(venv, ignore_errors=True)
            subprocess.run([uv(), "venv", "-q", "--python", stage.python or "3", str(venv)], env=env, check=True,
                           capture_output=True)
        elif source_file.exists() and source_file.read_text() == source_key:
            return venv
        for requirements in stage.pip:
            args = [host_requirement(r, stage.workdir) for r in requirements]
            uv_install(venv, [*([] if fresh else ["--reinstall-package", "lineagewire"]), *args], env,
                       f"Dockerfile stage {stage.name}")
        spec_file.write_text(spec_key.hexdigest())
        source_file.write_text(source_key)
    return venv


def _local(requirement: str, workdir: str) -> str:
    """``.[extras]`` and other paths relative to the WORKDIR, as absolute container paths."""
    path, bracket, extras = requirement.partition("[")
    if path == "." or path.startswith(("./", "../")):
        return str(pathlib.PurePosixPath(workdir, path)) + bracket + extras
    return requirement


def _is_path(requirement: str, workdir: str) -> bool:
    return requirement.split("[")[0] == workdir or requirement.startswith(workdir.rstrip("/") + "/")


def host_requirement(requirement: str, workdir: str) -> str:
    """A requirement as the test installs it: the source copied to ``workdir`` is the worktree."""
    path, bracket, extras = _local(requirement, workdir).partition("[")
    if _is_path(path, workdir):
        return str(ROOT / pathlib.PurePosixPath(path).relative_to(workdir)) + bracket + extras
    return requirement


# -- compose -----------------------------------------------------------------------------------------------------

_BARE = re.compile(r"\$(\w+)")
_BRACED = re.compile(r"(?P<name>\w+)(?:(?P<op>:?[-?+])(?P<arg>.*))?", re.DOTALL)


class MissingVariable(Exception):
    """A ``${VAR:?message}`` whose variable is not set: docker compose refuses the file with the message."""


def interpolate(value: Any, env: dict[str, str]) -> Any:
    """``value`` (from the compose file) with ``$VAR``, ``${VAR}``, ``${VAR:-default}``, ``${VAR:?error}``,
    ``${VAR:+alt}`` and ``$$`` replaced as docker compose replaces them; a default or alternative may hold
    variables of its own (``${NEW:-${OLD:-x}}``, a renamed variable's old name)."""
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value
    out, i = [], 0
    while i < len(value):
        bare = _BARE.match(value, i)
        if value.startswith("$$", i):
            out.append("$")
            i += 2
        elif value.startswith("${", i):
            end = _closing_brace(value, i + 2)
            out.append(_braced(value[i + 2:end], env))
            i = end + 1
        elif bare:
            out.append(env.get(bare.group(1)) or "")
            i = bare.end()
        else:
            out.append(value[i])
            i += 1
    return "".join(out)


def _closing_brace(text: str, start: int) -> int:
    """Where the ``${`` whose body starts at ``start`` ends, past the ``${...}`` inside it."""
    depth = 0
    for j in range(start, len(text)):
        if text.startswith("${", j):
            depth += 1
        elif text[j] == "}":
            if depth == 0:
                return j
            depth -= 1
    raise ValueError(f"{text!r}: a ${{ without its }}; expected ${{NAME}} or ${{NAME:-default}}")


def _braced(body: str, env: dict[str, str]) -> str:
    m = _BRACED.fullmatch(body)
    if m is None:
        raise ValueError(f"${{{body}}}: not a variable; expected ${{NAME}} or ${{NAME:-default}}")
    name, op, arg = m.group("name"), m.group("op"), m.group("arg") or ""
    given = env.get(name)
    unset = given is None or (given == "" and op is not None and op.startswith(":"))
    if op in ("?", ":?"):
        if unset:
            raise MissingVariable(f"{name}: {interpolate(arg, env)}")
        return str(given)
    if op in ("-", ":-"):
        return interpolate(arg, env) if unset else str(given)
    if op in ("+", ":+"):
        return "" if unset else interpolate(arg, env)
    return given or ""


def compose_file(env: dict[str, str]) -> dict[str, Any]:
    """The compose file as docker compose reads it with ``env`` (anchors and merge keys resolved)."""
    return interpolate(yaml.safe_load(COMPOSE.read_text()), env)


def required_variables() -> dict[str, str]:
    """Every ``${VAR:?...}`` of the compose file, with a made-up value (no check here reaches a real backend)."""
    names = sorted(set(re.findall(r"\$\{(\w+):\?", COMPOSE.read_text())))
    return {name: f"test-{name.lower()}" for name in names}


def composed() -> dict[str, Any]:
    """The compose file as docker compose reads it with the required variables set and no other."""
    return compose_file(required_variables())


def built_here(service: dict[str, Any]) -> str | None:
    """The Dockerfile stage a service is built from, or None for an image of someone else."""
    build = service.get("build")
    if build is None:
        return None
    if isinstance(build, str):
        build = {"context": build}
    if pathlib.Path(ROOT, build.get("context", "."), build.get("dockerfile", "Dockerfile")).resolve() != DOCKERFILE:
        return None
    target = build.get("target")
    if target is None:
        stages = list(dockerfile_stages(DOCKERFILE.read_text()))
        target = stages[-1]
    return str(target)
