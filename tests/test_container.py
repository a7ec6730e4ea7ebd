"""The container image and the Kubernetes manifests, checked without Docker or a cluster.

Dockerfile: hadolint finds nothing; the `spark` and `connect` targets install their extra's hashed lock
and the builder's wheel and run as a non-root user; the image's entrypoint, the `meshbot` console script,
runs init and plan; the wheel built from only what the build context holds (.dockerignore) installs and
runs.
deploy/k8s/: every manifest validates against Kubernetes 1.31's schemas in strict mode; the pods run
non-root on a read-only root with resources set; the ConfigMap is the example project, laid out as the
init container lays it out; the Job's and the CronJob's commands are meshbot's own, run here against
PostgreSQL with the Secret's variables.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

import bot
from bot.project.example import EXAMPLE_DIR

ROOT = Path(__file__).resolve().parents[1]
K8S = ROOT / "deploy" / "k8s"
KUBERNETES_VERSION = "1.31.0"   # the oldest release still in the support of the big managed offerings
BIN = Path(sys.executable).parent
IMAGE_USER = "10001:10001"


def _tool(name: str) -> str:
    executable = BIN / name
    assert executable.exists(), f"{name} is missing: pip install -e '.[test]' (it is in the test extra)"
    return str(executable)


def _env(**extra: str) -> dict[str, str]:
    """This machine's environment without what would steer meshbot (GitHub, PySpark, meshbot settings)."""
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "MESHBOT_", "SPARK_", "PYSPARK_"))}
    return {**keep, **extra}


# --- Dockerfile ---------------------------------------------------------------------------------------

def _instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, continuation lines joined (runs of blanks as one) and
    comments dropped."""
    logical, current = [], ""
    for line in text.splitlines():
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        logical.append(current + line)
        current = ""
    split = (" ".join(line.split()).split(" ", 1) for line in logical)
    return [(parts[0].upper(), parts[1] if len(parts) > 1 else "") for parts in split]


def _stages() -> dict[str, list[tuple[str, str]]]:
    stages: dict[str, list[tuple[str, str]]] = {}
    for instruction, arguments in _instructions((ROOT / "Dockerfile").read_text()):
        if instruction == "FROM":
            name = arguments.split(" AS ")[-1].strip()
            stages[name] = [(instruction, arguments)]
        elif stages:
            stages[list(stages)[-1]].append((instruction, arguments))
    return stages


def _hadolint(path: Path) -> list[dict]:
    import json

    result = subprocess.run([_tool("hadolint"), "--config", str(ROOT / ".hadolint.yaml"), "--format", "json",
                             str(path)], capture_output=True, text=True, timeout=60)
    assert result.returncode in (0, 1), result.stderr   # 1: findings; anything else is hadolint failing
    return json.loads(result.stdout or "[]")


def test_hadolint_finds_nothing_in_the_dockerfile():
    """At every level (error, warning, info, style), with the reviewed ignore list of .hadolint.yaml."""
    assert [f"{f['line']} {f['code']} {f['message']}" for f in _hadolint(ROOT / "Dockerfile")] == []


def test_hadolint_really_lints_and_ignores_only_the_reviewed_rule(tmp_path):
    """The one ignored rule is DL3008 (apt versions; the reason is beside it), nothing is ignored inline, and
    the same run does report what it should: a pip install that keeps its cache."""
    config = yaml.safe_load((ROOT / ".hadolint.yaml").read_text())
    assert config == {"ignored": ["DL3008"]}
    assert "hadolint ignore" not in (ROOT / "Dockerfile").read_text()
    worse = tmp_path / "Dockerfile"
    worse.write_text((ROOT / "Dockerfile").read_text().replace(
        "pip install --no-cache-dir --no-deps /dist/", "pip install --no-deps /dist/", 1))
    assert [f["code"] for f in _hadolint(worse)] == ["DL3042"]


def test_two_targets_install_their_extras_lock_and_the_builders_wheel_as_a_non_root_user():
    """Each target: the hashed lock of its extra (requirements/<extra>.txt, which tests/test_lock.py checks
    against pyproject.toml), then the builder's wheel alone; no editable install, no meshbot of an index."""
    stages = _stages()
    assert list(stages) == ["builder", "runtime", "connect", "spark"], "spark last: the default target"
    [(_, image)] = [i for i in _instructions((ROOT / "Dockerfile").read_text()) if i[0] == "ARG"][:1]
    assert re.fullmatch(r"PYTHON_IMAGE=python:3\.11-slim-bookworm", image)
    assert all(s[0][1].startswith("${PYTHON_IMAGE} AS ") or s[0][1].startswith("runtime AS ")
               for s in stages.values())
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert ("ENTRYPOINT", '["meshbot"]') in stages["runtime"] and scripts == {"meshbot": "bot.cli:main"}
    for target in ("connect", "spark"):
        steps = stages[target]
        assert steps[0][1] == f"runtime AS {target}" and steps[-1] == ("USER", IMAGE_USER), target
        [install] = [a for i, a in steps if i == "RUN" and "pip install" in a]
        assert install.startswith("--mount=type=bind,source=requirements,target=/requirements "
                                  "--mount=type=bind,from=builder,source=/dist,target=/dist ")
        assert re.findall(r"pip install [^&]*", install) == [
            f"pip install --no-cache-dir --require-hashes --requirement /requirements/{target}.txt ",
            "pip install --no-cache-dir --no-deps /dist/meshbot-*.whl"]
        assert (ROOT / "requirements" / f"{target}.txt").is_file()
    spark_run = " ".join(a for i, a in stages["spark"] if i == "RUN")
    assert "apt-get install -y --no-install-recommends openjdk-17-jre-headless" in spark_run
    assert "apt-get" not in " ".join(a for _, a in stages["connect"]) and "java" not in str(stages["connect"])
    assert "useradd --uid 10001 --gid 10001" in " ".join(a for i, a in stages["runtime"] if i == "RUN")


def _copied() -> set[str]:
    """What the builder stage copies from the build context: the wheel's sources."""
    return {source.rstrip("/") for i, a in _stages()["builder"] if i == "COPY" for source in a.split()[:-1]}


def test_the_build_context_holds_exactly_what_the_dockerfile_copies_and_mounts():
    """.dockerignore is an allowlist: everything out, then what the COPY lines name and the bind mounts read
    from the context (those without `from=`)."""
    mounted = {source for i, a in _instructions((ROOT / "Dockerfile").read_text()) if i == "RUN"
               for flags in re.findall(r"--mount=(\S+)", a) if "from=" not in flags
               for source in re.findall(r"source=([^,]+)", flags)}
    assert mounted == {"requirements"}
    copied = _copied() | mounted
    lines = [line for line in (ROOT / ".dockerignore").read_text().splitlines() if line and not line.startswith("#")]
    assert lines[0] == "*"
    assert {line[1:].rstrip("/") for line in lines if line.startswith("!")} == copied
    assert {"**/__pycache__", "**/.meshbot"} <= set(lines)


def test_the_images_entrypoint_answers_help_version_init_and_plan(tmp_path):
    """`meshbot`, the console script the image's ENTRYPOINT runs (here this environment's), in a fresh folder."""
    meshbot = _tool("meshbot")

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([meshbot, *args], cwd=tmp_path, env=_env(), capture_output=True, text=True,
                              timeout=120)

    shown = run("--help")   # the image's CMD
    assert shown.returncode == 0, shown.stderr
    assert {"init", "plan", "run", "janitor", "github"} <= set(re.findall(r"^  (\w+)", shown.stdout, re.M))
    version = run("--version")
    assert (version.returncode, version.stdout) == (0, f"meshbot, version {bot.__version__}\n")
    assert run("init", "shop").returncode == 0
    explain = run("-p", "shop", "plan", "--explain")
    assert explain.returncode == 0, explain.stderr
    assert "shop.orders" in explain.stdout and "backfill" in explain.stdout


@pytest.mark.slow   # builds a wheel and a virtualenv (~4 s alone), as tests/test_installed_package.py does
def test_the_wheel_built_from_the_build_context_installs_and_runs(tmp_path):
    """The builder stage's work without Docker: a wheel built from only the files it copies, installed as the
    targets install it (--no-deps, no `-e`) into a fresh virtualenv whose dependencies come from this
    environment (a path entry after its own) instead of the lock."""
    context, dist = tmp_path / "context", tmp_path / "dist"
    context.mkdir()
    dist.mkdir()
    for source in _copied():
        if (ROOT / source).is_dir():
            shutil.copytree(ROOT / source, context / source, ignore=shutil.ignore_patterns("__pycache__", "*.pyc",
                                                                                            ".meshbot"))
        else:
            shutil.copy2(ROOT / source, context / source)
    subprocess.run([sys.executable, "-c", "import sys, setuptools.build_meta as b; b.build_wheel(sys.argv[1])",
                    str(dist)], cwd=context, check=True, capture_output=True, timeout=120)
    [wheel] = dist.glob("meshbot-*.whl")
    assert wheel.name.startswith(f"meshbot-{bot.__version__}-")

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    purelib = Path(subprocess.run([str(venv / "bin/python"), "-c",
                                   "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  check=True, capture_output=True, text=True).stdout.strip())
    (purelib / "zz_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin/python"), "install", "-q", "--no-deps",
                    str(wheel)], check=True, capture_output=True, timeout=120)
    meshbot = venv / "bin" / "meshbot"
    where = subprocess.run([str(venv / "bin/python"), "-c", "import bot; print(bot.__file__)"], cwd=tmp_path,
                           env=_env(), capture_output=True, text=True, check=True).stdout
    assert where.startswith(str(purelib)), where
    assert subprocess.run([str(meshbot), "init", "shop"], cwd=tmp_path, env=_env(), timeout=120).returncode == 0
    explain = subprocess.run([str(meshbot), "-p", "shop", "plan", "--explain"], cwd=tmp_path, env=_env(),
                             capture_output=True, text=True, timeout=120)
    assert explain.returncode == 0 and "shop.orders" in explain.stdout, explain.stderr


# --- Kubernetes manifests ----------------------------------------------------------------------------

def _manifests() -> dict[str, dict]:
    """kind -> the one resource of that kind in deploy/k8s/."""
    resources = {}
    for path in sorted(K8S.glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            assert document["kind"] not in resources, f"two {document['kind']}s"
            resources[document["kind"]] = document
    return resources


def _pods() -> dict[str, dict]:
    manifests = _manifests()
    return {"Job": manifests["Job"]["spec"]["template"]["spec"],
            "CronJob": manifests["CronJob"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]}


def test_the_manifests_validate_strictly_against_kubernetes():
    manifests = _manifests()
    assert set(manifests) == {"Secret", "ConfigMap", "Job", "CronJob"}
    for kind, resource in manifests.items():
        assert kubernetes_validate.validate(resource, KUBERNETES_VERSION, strict=True) == "1.31", kind
    result = subprocess.run([_tool("kubernetes-validate"), "--strict", "-k", KUBERNETES_VERSION, "--quiet",
                             *map(str, sorted(K8S.glob("*.yaml")))], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_strict_validation_refuses_a_misspelt_field():
    """What strict mode adds: a key Kubernetes does not know, which kubectl would drop with a warning."""
    job = _manifests()["Job"]
    job["spec"]["template"]["spec"]["containers"][0]["imagePullPolcy"] = "Always"
    with pytest.raises(kubernetes_validate.ValidationError, match="imagePullPolcy"):
        kubernetes_validate.validate(job, KUBERNETES_VERSION, strict=True)


def test_the_pods_run_non_root_on_a_read_only_root_with_resources_and_the_released_image():
    manifests = _manifests()
    cron = manifests["CronJob"]["spec"]
    assert cron["concurrencyPolicy"] == "Forbid" and cron["timeZone"] == "Etc/UTC"
    for kind, pod in _pods().items():
        assert pod["automountServiceAccountToken"] is False and pod["restartPolicy"] == "Never"
        context = pod["securityContext"]
        assert context["runAsNonRoot"] is True and context["seccompProfile"] == {"type": "RuntimeDefault"}
        assert f"{context['runAsUser']}:{context['runAsGroup']}" == IMAGE_USER, "the Dockerfile's USER"
        for container in pod["initContainers"] + pod["containers"]:
            assert container["securityContext"] == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                                    "capabilities": {"drop": ["ALL"]}}, (kind, container["name"])
            assert all(set(container["resources"][level]) == {"cpu", "memory"} for level in ("requests", "limits"))
            # the connect variant of this version (the `ci` gateway is Spark Connect: no Java needed)
            assert container["image"] == f"ghcr.io/your-org/meshbot:{bot.__version__}-connect", (kind, container)
            writable = {m["mountPath"] for m in container["volumeMounts"] if not m.get("readOnly")}
            volumes = {v["name"]: v for v in pod["volumes"]}
            assert all("emptyDir" in volumes[m["name"]] for m in container["volumeMounts"] if not m.get("readOnly"))
            assert "/project" in writable
        [main] = pod["containers"]
        assert {m["mountPath"] for m in main["volumeMounts"]} == {"/project", "/tmp"}
        assert main["envFrom"] == [{"secretRef": {"name": manifests["Secret"]["metadata"]["name"]}}]


def test_the_secret_sets_every_variable_the_projects_ci_gateway_reads():
    manifests = _manifests()
    config = yaml.safe_load(manifests["ConfigMap"]["data"]["config.yaml"])

    def strings(value: object) -> list[str]:
        if isinstance(value, dict):
            return [s for v in value.values() for s in strings(v)]
        return [value] if isinstance(value, str) else []

    read = {name for text in strings(config["gateways"]["ci"]) for name in re.findall(r"env_var\('([A-Z_]+)'", text)}
    assert read and set(manifests["Secret"]["stringData"]) == read
    assert all(isinstance(v, str) for v in manifests["Secret"]["stringData"].values())


def _items(pod: dict) -> list[dict]:
    [volume] = [v for v in pod["volumes"] if "configMap" in v]
    return volume["configMap"]["items"]


def test_the_configmap_is_the_example_project_and_both_pods_lay_it_out_alike():
    data = _manifests()["ConfigMap"]["data"]
    example = {p.relative_to(EXAMPLE_DIR).as_posix(): p.read_text() for p in EXAMPLE_DIR.rglob("*")
               if p.is_file() and "__pycache__" not in p.parts}
    items = [_items(pod) for pod in _pods().values()]
    assert items[0] == items[1]
    assert {item["path"]: data[item["key"]] for item in items[0]} == example
    assert len(items[0]) == len(data)


def _kubelet_volume(where: Path, data: dict[str, str], items: list[dict]) -> None:
    """A ConfigMap volume as the kubelet writes one: the files in a timestamped folder, `..data` linking to it,
    and each top-level entry a symlink through `..data`."""
    stamped = where / "..2026_12_03_12_00_00.000000001"
    for item in items:
        (stamped / item["path"]).parent.mkdir(parents=True, exist_ok=True)
        (stamped / item["path"]).write_text(data[item["key"]])
    (where / "..data").symlink_to(stamped.name)
    for top in sorted({item["path"].split("/")[0] for item in items}):
        (where / top).symlink_to(f"..data/{top}")


@pytest.mark.postgres
def test_the_pods_commands_copy_the_project_then_plan_and_run_prod_with_the_secrets_variables(tmp_path,
                                                                                              state_database):
    """The init container's command on a ConfigMap volume laid out as the kubelet lays it out; then the Job's
    `plan prod --auto-apply` with --explain (it plans on the state the Secret names; applying would need the
    Spark Connect server) and the CronJob's `run prod --skip-if-busy`, which finds no prod to run yet."""
    manifests, pods = _manifests(), _pods()
    files, project = tmp_path / "project-files", tmp_path / "project"
    files.mkdir()
    project.mkdir()
    _kubelet_volume(files, manifests["ConfigMap"]["data"], _items(pods["Job"]))
    [init] = pods["Job"]["initContainers"]
    assert init["command"][:2] == ["sh", "-c"] and {m["mountPath"] for m in init["volumeMounts"]} == \
        {"/project-files", "/project"}
    script = init["command"][2].replace("/project-files", shlex.quote(str(files))).replace(
        "/project/", shlex.quote(str(project)) + "/")
    subprocess.run(["sh", "-c", script], check=True, timeout=30)
    copied = {p.relative_to(project).as_posix() for p in project.rglob("*") if p.is_file()}
    assert copied == {item["path"] for item in _items(pods["Job"])}
    assert not any(p.is_symlink() for p in project.rglob("*")) and not list(project.glob(".*"))

    # the Secret's variables, pointed at this machine's PostgreSQL (a database of the test's own)
    env = _env(**{**manifests["Secret"]["stringData"], "MESHBOT_STATE_HOST": "127.0.0.1",
                  "MESHBOT_STATE_USER": "postgres", "MESHBOT_STATE_PASSWORD": "",
                  "MESHBOT_STATE_DATABASE": state_database, "MESHBOT_SPARK_REMOTE": "sc://127.0.0.1:1"})

    def container(pod: dict, *more: str) -> subprocess.CompletedProcess:
        [main] = pod["containers"]
        args = [str(project) if arg == "/project" else arg for arg in main["args"]]
        return subprocess.run([_tool("meshbot"), *args, *more], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=120)

    assert _pods()["Job"]["containers"][0]["args"][-3:] == ["plan", "prod", "--auto-apply"]
    plan = container(pods["Job"], "--explain")
    assert plan.returncode == 0, plan.stdout + plan.stderr
    assert "shop.top_customers" in plan.stdout and "backfill" in plan.stdout
    assert pods["CronJob"]["containers"][0]["args"][-3:] == ["run", "prod", "--skip-if-busy"]
    run = container(pods["CronJob"])
    assert run.returncode == 1
    assert "environment `prod` does not exist (no environment exists yet); run `meshbot plan prod` first" in \
        run.stdout + run.stderr
    assert (project / ".meshbot").is_dir()   # where meshbot writes: the emptyDir, not the read-only root
