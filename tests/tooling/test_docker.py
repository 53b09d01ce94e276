"""Static checks of docker/: the compose stack, its Dockerfile and its README agree with the code.

There is no Docker engine here, so nothing is built or started: these tests parse the files and
check what can be checked without one. Compose's own interpolation (``${VAR:-default}``) is
reproduced with an empty environment, i.e. the stack as it runs with no ``.env`` file.
"""

from __future__ import annotations

import configparser
import fnmatch
import json
import re
import shlex
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from recovery.settings import spark_master_from_env
from tests.helpers import REPO
from zkstore.config import ENV_VARS, StoreConfig

pytestmark = pytest.mark.unit

ROOT = REPO
DOCKER = ROOT / "docker"
COMPOSE_FILE = DOCKER / "docker-compose.yml"
DOCKERFILE = DOCKER / "Dockerfile"
DOCKERIGNORE = DOCKER / "Dockerfile.dockerignore"
README = DOCKER / "README.md"

ZK_CLIENT_PORT = 2181
MINIO_PORT = 9000


# -- reading the files ------------------------------------------------------------------------


@cache
def compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE_FILE.read_text())
    assert isinstance(data, dict)
    return data


def services() -> dict[str, dict[str, Any]]:
    found = compose()["services"]
    assert isinstance(found, dict)
    return found


_VAR = re.compile(r"\$\$|\$\{(?P<name>\w+)(?::?-(?P<default>[^}]*))?\}|\$(?P<bare>\w+)")


def interpolate(value: object) -> str:
    """``value`` as Compose sees it with an empty environment; every variable needs a default."""

    def substitute(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        if match.group("bare") or match.group("default") is None:
            pytest.fail(f"{match.group(0)} has no default: the stack would need a .env file")
        return match.group("default")

    return _VAR.sub(substitute, str(value))


def env(service: str) -> dict[str, str]:
    raw = services()[service].get("environment") or {}
    if isinstance(raw, list):
        raw = dict(item.split("=", 1) for item in raw)
    return {key: interpolate(value) for key, value in raw.items()}


def command(service: str) -> list[str]:
    raw = services()[service].get("command") or []
    return shlex.split(raw) if isinstance(raw, str) else [str(part) for part in raw]


def option(args: list[str], name: str) -> str:
    assert name in args, f"{name} missing from {args}"
    return args[args.index(name) + 1]


def image(service: str) -> str:
    return str(services()[service].get("image", ""))


def by_image(prefix: str) -> list[str]:
    return sorted(name for name in services() if image(name).startswith(prefix))


def zkstore_services() -> list[str]:
    """Services built from docker/Dockerfile."""
    found = []
    for name, spec in services().items():
        build = spec.get("build")
        if isinstance(build, dict):
            built = (DOCKER / build["context"] / build["dockerfile"]).resolve()
            if built == DOCKERFILE:
                found.append(name)
    assert found, "no service is built from docker/Dockerfile"
    return sorted(found)


def daemons() -> list[str]:
    found = sorted(n for n in zkstore_services() if "daemon" in command(n))
    assert len(found) >= 2, f"want two or more recovery daemons, found {found}"
    return found


def zookeepers() -> list[str]:
    found = by_image("zookeeper:")
    assert len(found) == 3, f"want a three-node ZooKeeper ensemble, found {found}"
    return found


def spark_service(main_class: str) -> str:
    (found,) = [n for n in zkstore_services() if main_class in command(n)]
    return found


def mc_init() -> tuple[str, str, str]:
    """The one-shot MinIO client service: (service, alias, bucket) of its `mc mb`."""
    (name,) = by_image("minio/mc:")
    args = command(name)
    assert "mb" in args, f"{name} does not create a bucket: {args}"
    alias, bucket = args[-1].split("/", 1)
    return name, alias, bucket.strip("/")


def mounts(service: str) -> dict[str, str]:
    """Container path -> source (named volume or host path) of a service's short-form volumes."""
    found = {}
    for entry in services()[service].get("volumes", []):
        source, target, *_ = str(entry).split(":")
        found[target] = source
    return found


@cache
def dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of docker/Dockerfile, continuation lines joined."""
    text = re.sub(r"\\\n", "", DOCKERFILE.read_text())
    lines = [line.strip() for line in text.splitlines()]
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1])
        for line in lines
        if line and not line.startswith("#")
    ]


def setup_cfg() -> configparser.ConfigParser:
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg")
    return parser


# -- the README's docker compose commands ------------------------------------------------------

_GLOBAL_VALUE_OPTIONS = {"-f", "--file", "-p", "--project-name", "--profile", "--env-file"}
_VALUE_OPTIONS = {
    "run": {"--entrypoint", "-e", "--env", "-v", "--volume", "-w", "--workdir", "-u", "--user"},
    "exec": {"-e", "--env", "-w", "--workdir", "-u", "--user", "--index"},
    "logs": {"-n", "--tail", "--since", "--until"},
    "up": {"-t", "--timeout", "--scale", "--wait-timeout"},
    "kill": {"-s", "--signal"},
    "stop": {"-t", "--timeout"},
    "restart": {"-t", "--timeout"},
    "down": {"-t", "--timeout", "--rmi"},
}
_ONE_SERVICE = {"run", "exec"}
_MANY_SERVICES = {"up", "start", "stop", "restart", "kill", "logs", "ps", "rm", "build", "pull"}
_NO_SERVICES = {"down", "config"}


def readme_compose_commands() -> Iterator[list[str]]:
    """The argument lists of every `docker compose ...` in the README's code blocks."""
    in_code = False
    for line in README.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
            continue
        if in_code and line.startswith("docker compose "):
            lexer = shlex.shlex(line, posix=True, punctuation_chars="|&;<>")
            lexer.whitespace_split = True
            tokens = list(lexer)
            end = next((i for i, t in enumerate(tokens) if set(t) <= set("|&;<>")), len(tokens))
            yield tokens[2:end]


def services_named(args: list[str]) -> tuple[str, list[str]]:
    """(subcommand, services) of one `docker compose` argument list."""
    args = list(args)
    while args[0].startswith("-"):
        flag = args.pop(0)
        if flag in _GLOBAL_VALUE_OPTIONS:
            args.pop(0)
    subcommand, rest = args[0], args[1:]
    known = _ONE_SERVICE | _MANY_SERVICES | _NO_SERVICES
    assert subcommand in known, f"teach this test about `docker compose {subcommand}`"
    positional: list[str] = []
    while rest:
        arg = rest.pop(0)
        if arg.startswith("-") and not positional:
            if arg in _VALUE_OPTIONS.get(subcommand, set()):
                rest.pop(0)
            continue
        positional.append(arg)
        if subcommand in _ONE_SERVICE:
            break
    if subcommand in _NO_SERVICES:
        return subcommand, []
    return subcommand, [arg for arg in positional if not arg.startswith("-")]


# -- tests -------------------------------------------------------------------------------------


def test_the_stack_has_its_parts() -> None:
    assert len(zookeepers()) == 3
    assert by_image("minio/minio:") == ["minio"]
    mc_init()
    spark_service("org.apache.spark.deploy.master.Master")
    spark_service("org.apache.spark.deploy.worker.Worker")
    assert len(daemons()) >= 2
    assert services()["cli"]["profiles"] == ["tools"]
    assert "cli" in zkstore_services()


def test_every_service_the_readme_names_exists() -> None:
    named: set[str] = set()
    subcommands: set[str] = set()
    for args in readme_compose_commands():
        subcommand, found = services_named(args)
        subcommands.add(subcommand)
        named.update(found)
        assert set(found) <= set(services()), f"`docker compose {' '.join(args)}`"
    # The walk-through is all there: up, submit through the CLI, kill a daemon, tear down.
    assert {"up", "run", "kill", "logs", "down"} <= subcommands
    assert "cli" in named
    assert named & set(daemons())


def test_service_parser_reads_compose_arguments() -> None:
    run = shlex.split("--rm --entrypoint python cli /examples/pipeline.py generate /data/in")
    assert services_named(["run", *run]) == ("run", ["cli"])
    assert services_named(["-f", "x.yml", "logs", "-f", "--tail", "5", "a", "b"]) == (
        "logs",
        ["a", "b"],
    )
    assert services_named(["down", "-v"]) == ("down", [])


def test_readme_examples_exist_in_the_mounted_directory() -> None:
    examples = mounts("cli")["/examples"]
    assert (DOCKER / examples).resolve() == ROOT / "examples"
    mentioned = set(re.findall(r"/examples/([\w.]+\.py)", README.read_text()))
    assert mentioned
    for name in mentioned:
        assert (ROOT / "examples" / name).is_file(), name


def test_zkstore_variables_are_spelled_as_the_code_spells_them() -> None:
    known = set(ENV_VARS.values())
    for path in (COMPOSE_FILE, README):
        spelled = set(re.findall(r"\bZKSTORE_[A-Z0-9_]+", path.read_text()))
        assert spelled, path
        assert spelled <= known, f"{path.name}: {sorted(spelled - known)}"
    for name in zkstore_services():
        for key in env(name):
            assert not key.startswith("ZKSTORE_") or key in known, f"{name}: {key}"


def test_fsspec_variables_name_real_s3fs_options() -> None:
    import inspect

    s3fs = pytest.importorskip("s3fs")
    accepted = set(inspect.signature(s3fs.S3FileSystem.__init__).parameters)
    for name in daemons():
        fsspec_vars = [key for key in env(name) if key.startswith("FSSPEC_")]
        assert fsspec_vars, name
        for key in fsspec_vars:
            protocol, kwarg = key.split("_", 2)[1:]
            assert protocol == "S3" and kwarg.lower() in accepted, key


def test_daemon_environment_reaches_s3fs_as_the_minio_endpoint_and_credentials() -> None:
    """What fsspec does with the daemon's environment: endpoint, key and secret for s3://."""
    s3fs = pytest.importorskip("s3fs")
    from fsspec.config import apply_config, set_conf_env

    minio = env("minio")
    for name in daemons():
        daemon_env = env(name)
        conf: dict[str, dict[str, Any]] = {}
        set_conf_env(conf, daemon_env)
        kwargs = apply_config(s3fs.S3FileSystem, {}, conf)
        # fsspec JSON-decodes these values: a secret like 12345678 would arrive as an int.
        assert kwargs == {
            "endpoint_url": daemon_env["FSSPEC_S3_ENDPOINT_URL"],
            "key": minio["MINIO_ROOT_USER"],
            "secret": minio["MINIO_ROOT_PASSWORD"],
        }
        fs = s3fs.S3FileSystem(skip_instance_cache=True, **kwargs)
        assert fs.endpoint_url == "http://minio:9000"


def test_daemons_storage_is_the_minio_bucket_the_init_service_creates() -> None:
    init, alias, bucket = mc_init()
    mc_host = urlsplit(env(init)[f"MC_HOST_{alias}"])
    minio = env("minio")
    assert (mc_host.hostname, mc_host.port) == ("minio", MINIO_PORT)
    assert (mc_host.username, mc_host.password) == (
        minio["MINIO_ROOT_USER"],
        minio["MINIO_ROOT_PASSWORD"],
    )
    assert "--address" not in command("minio")  # the API stays on :9000
    assert services()[init]["depends_on"]["minio"]["condition"] == "service_healthy"
    for name in daemons():
        storage = urlsplit(env(name)["ZKSTORE_STORAGE"])
        assert storage.scheme == "s3"
        assert storage.hostname == bucket
        assert storage.path.strip("/"), "payloads go under a prefix, not the bucket root"
        endpoint = urlsplit(env(name)["FSSPEC_S3_ENDPOINT_URL"])
        assert (endpoint.scheme, endpoint.hostname, endpoint.port) == ("http", "minio", MINIO_PORT)
        condition = services()[name]["depends_on"][init]["condition"]
        assert condition == "service_completed_successfully"


def test_daemons_connect_to_the_three_zookeeper_nodes() -> None:
    expected = {f"{name}:{ZK_CLIENT_PORT}" for name in zookeepers()}
    for name in [*daemons(), "cli"]:
        hosts = env(name)["ZKSTORE_ZK"].split(",")
        assert len(hosts) == 3
        assert set(hosts) == expected, name
        for node in zookeepers():
            assert services()[name]["depends_on"][node]["condition"] == "service_healthy"


def test_zookeeper_grants_a_two_second_session() -> None:
    """Issue 28: ``--session-timeout 2`` is granted as asked (the minimum session is two ticks),
    and the quorum's limits stay as many seconds as the image's defaults (5 x 2 s, 2 x 2 s)."""
    for name in zookeepers():
        zoo = env(name)
        tick = int(zoo["ZOO_TICK_TIME"])
        assert 2 * tick <= 2000, name
        assert int(zoo["ZOO_INIT_LIMIT"]) * tick >= 10_000
        assert int(zoo["ZOO_SYNC_LIMIT"]) * tick >= 4000


def test_zookeeper_enforces_the_jobs_quotas() -> None:
    """Issue 54: each job's node has a quota (zkstore.cluster.quotas) that only a server with
    ``enforceQuota`` refuses writes past; the image appends ``ZOO_CFG_EXTRA`` to its zoo.cfg,
    whose unknown keys become ``zookeeper.<key>`` system properties."""
    for name in zookeepers():
        extra = dict(
            item.split("=", 1) for item in env(name).get("ZOO_CFG_EXTRA", "").split() if item
        )
        assert extra.get("enforceQuota") == "true", name


def quorum_entry(entry: str) -> tuple[str, str]:
    """``server.<id>=<host>:2888:3888;2181`` -> (id, host)."""
    match = re.fullmatch(rf"server\.(\d+)=([\w.-]+):2888:3888;{ZK_CLIENT_PORT}", entry)
    assert match, f"unexpected ZOO_SERVERS entry {entry!r}"
    return match.group(1), match.group(2)


def test_zookeeper_ensemble_lists_all_three_nodes_everywhere() -> None:
    nodes = zookeepers()
    ids = set()
    for name in nodes:
        zoo = env(name)
        servers = dict(quorum_entry(entry) for entry in zoo["ZOO_SERVERS"].split())
        assert sorted(servers.values()) == nodes, name
        assert servers[zoo["ZOO_MY_ID"]] == name == services()[name]["hostname"]
        ids.add(zoo["ZOO_MY_ID"])
        probe = " ".join(services()[name]["healthcheck"]["test"])
        (word,) = re.findall(r"echo (\w+) \| nc", probe)
        assert word in zoo["ZOO_4LW_COMMANDS_WHITELIST"].split(","), name
        assert {"/data", "/datalog"} <= set(mounts(name))
    assert len(ids) == 3


def test_daemons_are_configured_by_environment_only() -> None:
    for name in daemons():
        args = command(name)
        assert args[args.index("daemon") + 1 :] == [], f"{name} passes daemon flags: {args}"
        assert set(args[: args.index("daemon")]) <= {"-v", "-vv", "--verbose"}, name
        assert "entrypoint" not in services()[name]
        daemon_env = env(name)
        config = StoreConfig.from_env(daemon_env)  # validates hosts, root and cluster id
        assert config.zk_hosts == daemon_env["ZKSTORE_ZK"]
        assert config.storage_url == daemon_env["ZKSTORE_STORAGE"]
        assert config.signing_key
        assert spark_master_from_env(None, daemon_env).startswith("spark://")


def test_daemons_and_cli_share_one_configuration() -> None:
    def shared(name: str) -> dict[str, str]:
        return {k: v for k, v in env(name).items() if k.startswith(("ZKSTORE_", "FSSPEC_"))}

    reference = shared("cli")
    assert set(reference) >= {"ZKSTORE_ZK", "ZKSTORE_STORAGE", "ZKSTORE_SIGNING_KEY"}
    for name in daemons():
        assert shared(name) == reference, name
    hostnames = [services()[name].get("hostname") for name in daemons()]
    assert hostnames == daemons(), "a daemon's hostname names it in `jobs list` and its id"


def test_jobs_run_on_the_spark_master_and_share_data_with_the_worker() -> None:
    master = spark_service("org.apache.spark.deploy.master.Master")
    worker = spark_service("org.apache.spark.deploy.worker.Worker")
    master_args = command(master)
    url = f"spark://{option(master_args, '--host')}:{option(master_args, '--port')}"
    assert option(master_args, "--host") == master == services()[master]["hostname"]
    assert command(worker)[-1] == url
    for name in daemons():
        assert env(name)["ZKSTORE_SPARK_MASTER"] == url
        assert services()[name]["depends_on"][master]["condition"] == "service_healthy"
    # Drivers (daemons), executors (worker) and the CLI see the same files at the same path.
    data = {mounts(name).get("/data") for name in [*daemons(), worker, "cli"]}
    assert len(data) == 1 and None not in data
    assert data <= set(compose()["volumes"])


def test_health_checks_and_dependencies() -> None:
    one_shot = mc_init()[0]
    for name, spec in services().items():
        if name in [*daemons(), "cli", one_shot]:
            continue
        test = spec.get("healthcheck", {}).get("test")
        assert test, f"{name} has no health check"
        if test[:3] == ["CMD", "python", "-c"]:
            compile(test[3], f"{name} health check", "exec")
    assert services()[one_shot].get("restart") == "no"
    for name, spec in services().items():
        for dependency, rule in spec.get("depends_on", {}).items():
            assert dependency in services(), f"{name} -> {dependency}"
            if rule["condition"] == "service_healthy":
                assert "healthcheck" in services()[dependency], f"{name} -> {dependency}"


def test_state_lives_in_declared_named_volumes() -> None:
    declared = set(compose()["volumes"])
    for name in services():
        for target, source in mounts(name).items():
            if not source.startswith((".", "/")):
                assert source in declared, f"{name}:{target}"
    for name in [*zookeepers(), "minio"]:
        assert mounts(name)["/data"] in declared, name


def test_services_are_built_from_the_repository_root() -> None:
    assert len(zkstore_services()) >= 5  # daemons, cli, Spark master and worker
    for name in zkstore_services():
        assert (DOCKER / services()[name]["build"]["context"]).resolve() == ROOT
        assert image(name) == image("cli"), "one image, built once"


def test_dockerfile_installs_the_extras_that_setup_cfg_defines() -> None:
    extras = set(setup_cfg()["options.extras_require"])
    runs = [args for instruction, args in dockerfile() if instruction == "RUN"]
    installs = [run for run in runs if "pip install" in run]
    named: set[str] = set()
    for run in installs:
        assert "--no-cache-dir" in run, run
        for group in re.findall(r"\.\[([\w,-]+)\]", run):
            named.update(group.split(","))
        # The dependency layer reads extras straight from setup.cfg.
        named.update(re.findall(r"\['options\.extras_require'\]\['([\w-]+)'\]", run))
    assert "s3" in named
    assert named <= extras


def test_dockerfile_image_basics() -> None:
    instructions = dockerfile()
    (base,) = [args for instruction, args in instructions if instruction == "FROM"]
    assert base.startswith("python:3.11")
    assert "Programming Language :: Python :: 3.11" in setup_cfg()["metadata"]["classifiers"]
    assert any(i == "RUN" and "jre" in args for i, args in instructions), "no Java runtime"
    users = [args for instruction, args in instructions if instruction == "USER"]
    assert users and users[-1].split(":")[0] not in {"root", "0"}
    entrypoint = [json.loads(a) for i, a in instructions if i == "ENTRYPOINT"]
    assert entrypoint[-1] == ["zkstore"]
    scripts = setup_cfg()["options.entry_points"]["console_scripts"]
    assert "zkstore = recovery.cli.entry:main" in scripts
    assert [json.loads(a) for i, a in instructions if i == "CMD"][-1] == ["daemon"]


def dockerignored(path: str) -> bool:
    """Whether BuildKit leaves ``path`` out of the context (last matching pattern wins)."""
    ignored = False
    for line in DOCKERIGNORE.read_text().splitlines():
        pattern = line.strip()
        if not pattern or pattern.startswith("#"):
            continue
        negate = pattern.startswith("!")
        pattern = pattern.lstrip("!").rstrip("/")
        parts = Path(path).parts
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        if any(fnmatch.fnmatch(prefix, pattern) for prefix in prefixes):
            ignored = not negate
    return ignored


def test_build_context_holds_what_the_dockerfile_copies_and_no_more() -> None:
    copies = [args.split()[:-1] for instruction, args in dockerfile() if instruction == "COPY"]
    sources = [source for sources in copies for source in sources]
    assert {"setup.cfg", "zkstore", "recovery"} <= set(sources)
    for source in sources:
        assert (ROOT / source).exists(), source
        assert not dockerignored(source), f"{source} is copied but ignored"
    assert not dockerignored("zkstore/payloads/store.py")
    for heavy in (".venv", ".git", "tests", ".mypy_cache", "zkstore/__pycache__"):
        assert dockerignored(heavy), heavy


def test_daemons_run_their_drivers_as_users_apart_from_their_secrets() -> None:
    """Issue 54: the stack's daemons hold the signing key, so they run as root with a pool of
    driver users that the Dockerfile makes (none root, none the image's own user), which the
    daemon's own check accepts; without the pool it would refuse to start."""
    from dataclasses import replace

    from recovery.member.driveruser import check_apart
    from recovery.settings import DaemonSettings, DriverUser
    from zkstore.errors import ConfigError

    made: set[str] = set()
    for instruction, args in dockerfile():
        loop = re.search(r"for n in ([\d ]+); do .*useradd .*\"zkjob\$n\"", args)
        if instruction == "RUN" and loop:
            made |= {f"zkjob{n}" for n in loop.group(1).split()}
    for name in daemons():
        assert services()[name].get("user") in ("root", "0", "0:0"), name
        pool = env(name)[ENV_VARS["driver_users"]].split(",")
        assert len(pool) >= 2 and set(pool) <= made, (pool, made)
        assert not {"root", "zkstore"} & set(pool)
        config = StoreConfig.from_env(env(name))
        assert config.signing_key
        bare = DaemonSettings(store=config, daemon_id=name)
        with pytest.raises(ConfigError, match="--jobs-may-read-secrets"):
            check_apart(bare, accepted=False)
        users = tuple(
            DriverUser(n, 20000 + i, 20000 + i, (), "/nonexistent") for i, n in enumerate(pool)
        )
        check_apart(replace(bare, driver_users=users, max_drivers=len(users)), accepted=False)
    assert "chmod 2775 /data" in DOCKERFILE.read_text(), "the pool's users write /data"
