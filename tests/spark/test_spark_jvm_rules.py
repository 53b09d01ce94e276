"""The pure rules of the drivers' Spark JVMs (issue 47): which settings are fixed at JVM launch,
what a deployment's configuration directory becomes, what the launcher prints, the archive's
key and sidecar, the warm drivers' records and offer, their default number, and the daemon's
refusals of settings it cannot honour."""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import struct
from dataclasses import replace
from pathlib import Path

import pytest

from recovery.capacity import GiB, HostSize, default_max_drivers, default_warm_drivers
from recovery.driver.warm_jvm import SparkJvm
from recovery.member.warm_jvms import confdir, home
from recovery.member.warm_jvms.archive import (
    DUMP_JIT,
    ArchiveKey,
    Sidecar,
    dump_options,
    private_problem,
    remove_stale,
    verify,
)
from recovery.member.warm_jvms.pool import WarmUpFailed, idle_wait, parse_connection_info
from recovery.member.warm_jvms.warm_jvm_records import WarmRecord
from recovery.proctitle import fit, warm_driver_title
from recovery.settings import DaemonSettings
from recovery.shared.jvm_settings import (
    JVM_LEVEL,
    SubmitArgs,
    WarmOffer,
    class_path_reason,
    jvm_reason,
    master_reason,
    parse_properties,
    parse_submit_args,
    quote_option,
    run_reason,
)
from recovery.shared.sparkconf import spark_submit_args
from tests.cli import zkstore
from zkstore.config import StoreConfig
from zkstore.errors import ConfigError
from zkstore.jobs.runspec import DECIDING_KEYS, RunSpec
from zkstore.jobs.shown import MAX_CONF_BYTES, conf_text

pytestmark = pytest.mark.unit

# -- settings fixed at JVM launch ---------------------------------------------------------------


@pytest.mark.parametrize("key", sorted(JVM_LEVEL))
def test_each_jvm_level_setting_other_than_the_warm_drivers_makes_an_attempt_cold(key: str) -> None:
    reason = jvm_reason({key: "something-else"}, {})
    assert reason is not None and reason.startswith(key) and "fixed at JVM launch" in reason


def test_the_same_values_as_the_warm_drivers_and_context_settings_keep_it_warm() -> None:
    defaults = {"spark.driver.memory": "2g", "spark.driver.extraJavaOptions": "-Da=b"}
    attempt = {
        "spark.driver.memory": "2g",  # what the warm JVMs were started with
        "spark.executor.memory": "4g",  # a context's setting: any value
        "spark.sql.shuffle.partitions": "7",
        "spark.submit.deployMode": "client",  # what unset means
        "spark.app.name": "x",
    }
    assert jvm_reason(attempt, defaults) is None
    assert jvm_reason({}, defaults) is None
    assert "warm drivers have unset" in (jvm_reason({"spark.jars": "a.jar"}, defaults) or "")
    assert "'2g'" in (jvm_reason({"spark.driver.memory": "1g"}, defaults) or "")


def test_a_handle_keeping_a_jvm_level_setting_the_warm_drivers_lack_launches_it_cold() -> None:
    """The daemon's hint, from the run options the handle keeps (typed, fleet protocol 4):
    every JVM-level setting is kept, a long one by its digest, so none is lost to a cut; a
    secret says nothing."""
    defaults = {"spark.driver.memory": "2g"}

    def kept(**conf: str) -> RunSpec:
        spec = RunSpec.of({k.replace("_", "."): v for k, v in conf.items()}, {})
        return RunSpec.from_summary(spec.summary_fields())  # as the daemon reads it back

    cold = run_reason(kept(spark_driver_extraJavaOptions="-Dx=1"), defaults)
    assert cold is not None and cold.startswith("spark.driver.extraJavaOptions=")
    assert "fixed at JVM launch" in cold
    assert "'1g'" in (run_reason(kept(spark_driver_memory="1g"), defaults) or "")
    assert "master yarn" in (run_reason(kept(spark_master="yarn"), defaults) or "")
    for warm in (
        None,
        RunSpec(),
        kept(spark_driver_memory="2g", spark_executor_memory="8g"),
        kept(spark_submit_deployMode="client", spark_master="local[2]"),
        kept(spark_sql_shuffle_partitions="7"),
    ):
        assert run_reason(warm, defaults) is None, warm
    # a long value: compared by its digest, exactly (the start alone would match)
    long = "-Dx=" + "y" * MAX_CONF_BYTES
    same = {"spark.driver.extraJavaOptions": long}
    assert run_reason(kept(spark_driver_extraJavaOptions=long), same) is None
    longer = run_reason(kept(spark_driver_extraJavaOptions=long + "z"), same)
    assert longer is not None and "fixed at JVM launch" in longer
    # the settings before it in the display text no longer hide it
    hidden = kept(spark_a="y" * MAX_CONF_BYTES, spark_b="y" * 60, spark_driver_memory="1g")
    assert "'1g'" in (run_reason(hidden, defaults) or "")


def test_a_handle_of_before_protocol_4_is_read_from_its_shown_text() -> None:
    """An older handle's ``conf`` text (cut, redacted) read into the same run options: what
    it shows decides; what it cannot show (a value redacted, a pair cut off) says nothing."""
    defaults = {"spark.driver.memory": "2g"}

    def shown(**conf: str) -> RunSpec:
        text = conf_text({k.replace("_", "."): v for k, v in conf.items()})
        return RunSpec.from_summary({"conf": text} if text else {})

    assert "'1g'" in (run_reason(shown(spark_driver_memory="1g"), defaults) or "")
    assert run_reason(shown(spark_driver_memory="2g"), defaults) is None
    long = "-Dx=" + "y" * MAX_CONF_BYTES
    cut = run_reason(shown(spark_driver_extraJavaOptions=long), {})
    assert cut is not None and "fixed at JVM launch" in cut
    same = {"spark.driver.extraJavaOptions": long}
    assert run_reason(shown(spark_driver_extraJavaOptions=long), same) is None
    hidden = shown(spark_a="y" * MAX_CONF_BYTES, spark_driver_memory="1g")
    assert run_reason(hidden, defaults) is None
    assert run_reason(RunSpec.from_summary({"conf": "garbage without pairs"}), defaults) is None


def test_the_keys_the_handle_keeps_first_are_the_ones_the_warm_decision_reads() -> None:
    assert frozenset({*JVM_LEVEL, "spark.master"}) == DECIDING_KEYS


@pytest.mark.parametrize(
    ("master", "warm"),
    [
        ("local", True),
        ("local[2]", True),
        ("local[*]", True),
        ("local[2, 3]", True),
        ("spark://host:7077", True),
        ("yarn", False),
        ("k8s://https://api:6443", False),
        ("mesos://x:5050", False),
    ],
)
def test_warm_drivers_serve_local_and_standalone_masters(master: str, warm: bool) -> None:
    assert (master_reason(master) is None) is warm


def test_the_class_path_keeps_the_archive_unless_the_job_changes_it() -> None:
    assert class_path_reason({}, {}) is None
    assert (
        class_path_reason(
            {"spark.driver.extraClassPath": "/x"}, {"spark.driver.extraClassPath": "/x"}
        )
        is None
    )
    assert class_path_reason({"spark.jars": "a.jar"}, {}) is None  # on the app's loader, not -cp
    reason = class_path_reason({"spark.driver.extraClassPath": "/opt/lib/*"}, {})
    assert reason is not None and "spark.driver.extraClassPath" in reason


def test_a_scripts_submit_args_read_back_as_the_driver_wrote_them() -> None:
    conf = {"spark.files": "/a b/c.csv,/d", "spark.x": "k=v with spaces", "spark.y": "'q'"}
    args = ["--properties-file", "/etc/spark/spark-defaults.conf"]
    text = shlex.join(
        [*args, *spark_submit_args("local[1]", conf, "a job [x #1]"), "pyspark-shell"]
    )
    parsed = parse_submit_args(text)
    assert (parsed.master, parsed.name, parsed.conf) == ("local[1]", "a job [x #1]", conf)
    assert parsed.properties_file == "/etc/spark/spark-defaults.conf"
    assert parsed.others == ()
    assert parse_submit_args("--driver-memory 4g pyspark-shell").others == ("--driver-memory", "4g")


def test_spark_defaults_conf_is_read_as_spark_reads_a_properties_file() -> None:
    text = (
        "# a comment\n! another\n\n"
        "spark.driver.memory   2g\n"
        "spark.driver.extraJavaOptions=-Da=1 \\\n    -Db=2\n"
        "spark.master:local[2]\n"
        "  spark.lonely\n"
    )
    assert parse_properties(text) == {
        "spark.driver.memory": "2g",
        "spark.driver.extraJavaOptions": "-Da=1 -Db=2",
        "spark.master": "local[2]",
        "spark.lonely": "",
    }


# -- the deployment's configuration directory ---------------------------------------------------


def test_a_configuration_directory_becomes_a_properties_file_and_a_late_class_path() -> None:
    where = Path("/etc/spark/conf")
    assert confdir.plan(where, []) == confdir.ConfPlan(where)
    assert confdir.plan(where, ["spark-defaults.conf.template", "log4j2.properties.template"]) == (
        confdir.ConfPlan(where)
    )
    plan = confdir.plan(where, ["spark-defaults.conf", "log4j2.properties", "hive-site.xml"])
    assert plan.properties == where / "spark-defaults.conf" and plan.on_class_path
    assert plan.keep_reason is None
    only = confdir.plan(where, ["spark-defaults.conf"])
    assert only.properties is not None and not only.on_class_path
    env = confdir.environment({"SPARK_DIST_CLASSPATH": "/hadoop/*"}, plan, Path("/w/conf"))
    assert env == {"SPARK_CONF_DIR": "/w/conf", "SPARK_DIST_CLASSPATH": f"/hadoop/*:{where}"}


def test_a_spark_env_script_keeps_the_deployments_directory() -> None:
    plan = confdir.plan(Path("/etc/spark/conf"), ["spark-env.sh", "spark-defaults.conf"])
    assert plan.keep_reason is not None and "spark-env.sh" in plan.keep_reason
    assert confdir.environment({}, plan, Path("/w/conf")) == {}


# -- Spark's launcher ---------------------------------------------------------------------------


def test_the_launchers_command_is_read_past_its_messages() -> None:
    printed = b"a warning for people\n\0\n/usr/bin/java\0-cp\0/c:/j/*\0-Xmx1g\0Main\0"
    command = home.parse_launcher_output(printed)
    assert command == ["/usr/bin/java", "-cp", "/c:/j/*", "-Xmx1g", "Main"]
    assert home.class_path(command) == "/c:/j/*"
    with pytest.raises(OSError):
        home.parse_launcher_output(b"Exception in thread main\n")


def test_an_option_is_quoted_as_the_launcher_splits_it() -> None:
    assert shlex.split(quote_option('-Dx=/a b/"c"\\d')) == ['-Dx=/a b/"c"\\d']


def test_the_scala_version_comes_from_sparks_core_jar(tmp_path: Path) -> None:
    (tmp_path / "jars").mkdir()
    assert home.scala_version(tmp_path) == ""
    (tmp_path / "jars" / "spark-core_2.13-4.0.0.jar").touch()
    assert home.scala_version(tmp_path) == "2.13"


# -- the archive's key and sidecar --------------------------------------------------------------

KEY = ArchiveKey("/usr/bin/java", 10, 20, "4.0.0", "/spark", "/w/conf:/spark/jars/*")


def test_the_archive_is_made_by_a_c1_jvm_with_the_environments_own_options_after() -> None:
    """The making JVM compiles with C1 alone (a quarter less CPU; the archive holds classes, not
    compiled code), writes the new archive, maps no other, and an operator's own option, after
    the dump's, still wins."""
    made = dump_options(
        Path("/s/archive.jsa"),
        Path("/s"),
        "-XX:SharedArchiveFile=/old.jsa -Xmx1g -Xshare:auto '-Dname=a b' -XX:TieredStopAtLevel=4",
    )
    assert shlex.split(made) == [
        "-Djava.io.tmpdir=/s",
        "-XX:ArchiveClassesAtExit=/s/archive.jsa",
        "-Xlog:cds=off",
        "-Xlog:cds+dynamic=off",
        DUMP_JIT,
        "-Xmx1g",
        "-Dname=a b",
        "-XX:TieredStopAtLevel=4",
    ]
    assert DUMP_JIT == "-XX:TieredStopAtLevel=1"


def test_the_pools_thread_sleeps_until_a_put_off_start_is_due_and_never_spins() -> None:
    """A start put off after a take (REPLACE_AFTER) is made when due, not up to a second late;
    with none due the thread sleeps a second (it spun at 100 Hz with the put-off start past)."""
    assert idle_wait(due_at=10.4, now=10.0) == pytest.approx(0.4)
    assert idle_wait(due_at=15.0, now=10.0) == 1.0
    assert idle_wait(due_at=9.0, now=10.0) == 1.0
    assert idle_wait(due_at=0.0, now=10.0) == 1.0


def test_every_part_of_the_key_names_another_archive() -> None:
    names = {KEY.name}
    for change in (
        {"java": "/opt/java"},
        {"java_size": 11},
        {"java_mtime_ns": 21},
        {"pyspark": "4.0.1"},
        {"spark_home": "/other"},
        {"class_path": "/x"},
    ):
        names.add(replace(KEY, **change).name)  # type: ignore[arg-type]
    assert len(names) == 7


def test_a_sidecar_reads_back_and_refuses_anything_else() -> None:
    sidecar = Sidecar(KEY, 5, "ab" * 32, "2026-01-01T00:00:00+00:00")
    assert Sidecar.parse(sidecar.to_bytes()) == sidecar
    raw = json.loads(sidecar.to_bytes())
    for bad in (
        {**raw, "format": 2},
        {**raw, "size": "5"},
        {**raw, "key": {**raw["key"], "java_size": "10"}},
        {**raw, "key": None},
        [raw],
    ):
        with pytest.raises(ValueError):
            Sidecar.parse(json.dumps(bad).encode())


def _write_archive(directory: Path, data: bytes = b"classes") -> Path:
    archive = directory / f"{KEY.name}.jsa"
    archive.write_bytes(data)
    sidecar = Sidecar(KEY, len(data), hashlib.sha256(data).hexdigest(), "2026-01-01T00:00:00+00:00")
    (directory / f"{KEY.name}.json").write_bytes(sidecar.to_bytes())
    for path in (archive, archive.with_suffix(".json")):
        os.chmod(path, 0o644)
    return archive


def test_only_an_archive_that_matches_its_sidecar_and_key_is_trusted(tmp_path: Path) -> None:
    archive = _write_archive(tmp_path)
    assert verify(tmp_path, KEY) == (archive, "verified")
    assert verify(tmp_path, replace(KEY, pyspark="9.9"))[0] is None  # another key: another name
    archive.write_bytes(b"classez")  # same size, other bytes
    found, why = verify(tmp_path, KEY)
    assert found is None and "sha256" in why
    _write_archive(tmp_path)
    os.chmod(archive, 0o666)
    assert "changed by others" in verify(tmp_path, KEY)[1]
    os.chmod(archive, 0o644)
    archive.unlink()
    archive.symlink_to(tmp_path / "elsewhere.jsa")
    (tmp_path / "elsewhere.jsa").write_bytes(b"classes")
    assert "not a regular file" in verify(tmp_path, KEY)[1]
    assert private_problem(tmp_path, directory=True) is None


def _write_key(directory: Path, key: ArchiveKey) -> None:
    data = key.name.encode()
    (directory / f"{key.name}.jsa").write_bytes(data)
    sidecar = Sidecar(key, len(data), hashlib.sha256(data).hexdigest(), "2026-01-01T00:00:00Z")
    (directory / f"{key.name}.json").write_bytes(sidecar.to_bytes())


def test_a_shared_cache_keeps_the_archives_of_other_installations(tmp_path: Path) -> None:
    """Issue 56.3: the per-user cache holds the archives of every Spark home and Java its
    user's daemons run; a daemon removes only its own installation's older ones (and those
    nobody can verify), never another's."""
    older = replace(KEY, pyspark="3.5.0")
    updated_java = replace(KEY, java_size=99)
    other_home = replace(KEY, spark_home="/other/spark")
    other_java = replace(KEY, java="/opt/jdk21/bin/java")
    for key in (KEY, older, updated_java, other_home, other_java):
        _write_key(tmp_path, key)
    orphan = replace(KEY, class_path="/gone").name
    (tmp_path / f"{orphan}.jsa").write_bytes(b"no sidecar")
    assert remove_stale(tmp_path, KEY) == 5
    left = {p.name.rsplit(".", 1)[0] for p in tmp_path.iterdir()}
    assert left == {KEY.name, other_home.name, other_java.name}


def test_the_default_directories_keep_the_archive_in_the_users_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    from recovery.member.launcher import class_data_dir, default_work_root

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    store = StoreConfig(zk_hosts="127.0.0.1:1", storage_url=f"file://{tmp_path}/storage")
    plain = DaemonSettings(store=store, daemon_id="d1", class_data="auto")
    work = default_work_root(plain)
    cache = class_data_dir(plain, work)
    assert cache == tmp_path / f"zkstore-{os.getuid()}" / "class-data"
    assert not cache.is_relative_to(work.parent), "not removed with the daemon's directory"
    own = replace(plain, work_dir=str(tmp_path / "w"))
    assert class_data_dir(own, tmp_path / "w") == tmp_path / "w" / ".class-data"
    assert class_data_dir(replace(plain, class_data="off"), work) is None


# -- warm drivers -------------------------------------------------------------------------------


def test_a_warm_drivers_record_reads_back_and_refuses_garbage() -> None:
    record = WarmRecord("0123abcd", "h", "boot", "/log", uid=1001, pid=4, start_ticks=5)
    taken = record.taken_by("job", 2, Path("/logs/job/attempt-2.log"))
    for one in (record, taken):
        assert WarmRecord.parse(one.to_bytes()) == one
    assert taken.taken and not record.taken
    for bad in ({"warm_id": "../x"}, {"pid": "4"}, {"attempt": 1.5}):
        raw = {**json.loads(record.to_bytes()), **bad}
        with pytest.raises(ValueError):
            WarmRecord.parse(json.dumps(raw).encode())


def test_the_offer_carries_the_secret_but_never_shows_it() -> None:
    offer = WarmOffer("0123abcd", 42, 7, 40000, "s3cr3t", {"spark.driver.memory": "1g"}, 9.5)
    assert WarmOffer.from_json(offer.to_json()) == offer
    assert "s3cr3t" not in repr(offer)
    with pytest.raises(ValueError):
        WarmOffer.from_json(json.dumps({**json.loads(offer.to_json()), "port": "40000"}))


def test_the_gateways_connection_info_is_read_as_pyspark_writes_it() -> None:
    assert parse_connection_info(struct.pack(">ii", 40000, 6) + b"s3cr3t") == (40000, "s3cr3t")
    for bad in (b"", struct.pack(">ii", 0, 1) + b"x", struct.pack(">ii", 1, 9) + b"short"):
        with pytest.raises(WarmUpFailed):
            parse_connection_info(bad)


def test_ps_names_a_warm_driver() -> None:
    assert fit(warm_driver_title("0123abcd")) == "zkstore warm-driver 0123abcd"


@pytest.mark.parametrize(
    ("cores", "memory_gib", "expected"),
    [
        (2, 24, 1),  # this machine: one per two cores
        (8, 64, 4),
        (8, 16, 0),  # the slots take the memory
        (1, 4, 1),
        (0.5, 1, 0),
        (256, 2048, 4),  # capped
    ],
)
def test_the_default_number_of_warm_drivers_counts_their_memory(
    cores: float, memory_gib: int, expected: int
) -> None:
    host = HostSize(cores=cores, memory=memory_gib * GiB)
    assert default_warm_drivers(host, default_max_drivers(host)) == expected


def _settings(**changes: object) -> DaemonSettings:
    store = StoreConfig(zk_hosts="127.0.0.1:1", storage_url="file:///tmp/s")
    return DaemonSettings(store=store, daemon_id="d1", max_drivers=4, **changes)  # type: ignore[arg-type]


def test_the_daemon_refuses_warm_drivers_it_cannot_use() -> None:
    assert _settings(warm_drivers=4, spark_master="spark://m:7077").warm_drivers == 4
    with pytest.raises(ConfigError, match="more than --max-drivers"):
        _settings(warm_drivers=5)
    with pytest.raises(ConfigError, match="spark-submit"):
        _settings(warm_drivers=1, spark_master="yarn")
    with pytest.raises(ConfigError, match="absolute"):
        _settings(class_data="relative/dir")
    assert _settings(class_data="/abs").class_data == "/abs"
    assert _settings().warm_up_passes == 2 and _settings(warm_up_passes=0).warm_up_passes == 0
    with pytest.raises(ConfigError, match="--warm-up-passes 11: from 0 to 10"):
        _settings(warm_up_passes=11)


@pytest.mark.parametrize("given", ["-1", "11", "many"])
def test_the_daemon_command_refuses_warm_up_passes_out_of_range(given: str) -> None:
    """As an operator types it (the option, or its variable), before any connection: a usage
    error naming the option."""
    config = StoreConfig(zk_hosts="127.0.0.1:1", storage_url="file:///tmp/s")
    typed = zkstore(config, "daemon", "--warm-up-passes", given)
    assert typed.returncode == 2, typed
    assert "Invalid value for '--warm-up-passes'" in typed.stderr, typed.stderr
    from_env = zkstore(config, "daemon", env={"ZKSTORE_WARM_UP_PASSES": given})
    assert from_env.returncode == 2 and "'--warm-up-passes'" in from_env.stderr, from_env


def test_a_driver_its_daemon_gave_no_warm_jvm_says_why_and_whether_its_settings_agree() -> None:
    declined = "spark.driver.memory='1g' (the driver JVM's heap) is fixed at JVM launch"
    jvm = SparkJvm(None, None, {}, declined=declined)
    agrees = jvm._cold_reason(SubmitArgs(), {"spark.driver.memory": "1g"})
    assert agrees is not None and agrees.startswith("spark.driver.memory='1g'")
    assert "job's summary" in agrees
    differs = jvm._cold_reason(SubmitArgs(), {})
    assert differs is not None and "would have matched" in differs and declined in differs
    assert "no warm driver was ready" in (
        SparkJvm(None, None, {"ZKSTORE_DRIVER_WARM": "1"})._cold_reason(SubmitArgs(), {}) or ""
    )
