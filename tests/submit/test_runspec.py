"""A job's run options as one typed value (issue 53 item 4): what the handle keeps of them, read
back once, the older display texts read into the same value, and what people see derived."""

from __future__ import annotations

import json

import pytest

from zkstore import protocol
from zkstore.errors import ConfigError, CorruptHandle, NewerRecord
from zkstore.jobs.definition import JobDefinition
from zkstore.jobs.dependencies import Dependency
from zkstore.jobs.runoptions import LifecycleOptions
from zkstore.jobs.runspec import (
    MAX_RUN_BYTES,
    MAX_VALUE_BYTES,
    RUN,
    RunSpec,
    SparkSetting,
    digest,
)
from zkstore.jobs.shown import REDACTED, run_options_shown
from zkstore.records.handle import FORMAT, RUN_FORMAT, Handle, PayloadRef

pytestmark = pytest.mark.unit

SECRET = "hunter2-very-secret"


def _definition(typed: bool, **conf: str) -> JobDefinition:
    return JobDefinition.for_script(
        "j1",
        "print(1)\n",
        filename="/tmp/j1.py",
        spark_conf=conf or {"spark.driver.memory": "1g", "spark.ssl.keyPassword": SECRET},
        require={"zone": "a", "gpu": "yes"},
        typed_run=typed,
    )


def test_the_handle_keeps_one_typed_field_and_reads_it_back_whole() -> None:
    definition = _definition(True)
    summary = definition.summary()
    assert "require" not in summary and "conf" not in summary
    assert isinstance(summary[RUN], str)
    run = RunSpec.from_summary(summary)
    assert run == definition.run
    assert run.labels == {"gpu": "yes", "zone": "a"}
    assert run.setting("spark.driver.memory") == SparkSetting("spark.driver.memory", "1g")
    assert run.setting("spark.ssl.keyPassword") == SparkSetting(
        "spark.ssl.keyPassword", secret=True
    )
    assert run.conf_shown() == f"spark.driver.memory=1g, spark.ssl.keyPassword={REDACTED}"
    assert run.require_shown() == "gpu=yes,zone=a"


def test_a_secret_value_is_neither_stored_nor_shown() -> None:
    definition = _definition(True)
    handle = Handle.for_payload(PayloadRef("file:///x", 1, "0" * 64), "w", definition.summary())
    assert SECRET.encode() not in handle.to_bytes()
    run = RunSpec.from_summary(Handle.parse(handle.to_bytes(), "/h").summary)
    assert SECRET not in (run.conf_shown() or "")
    assert digest(SECRET) not in handle.to_bytes().decode()


def test_older_handles_texts_read_into_the_same_run_options() -> None:
    typed, texts = _definition(True), _definition(False)
    assert "run" not in texts.summary()
    assert texts.summary()["require"] == "gpu=yes,zone=a"
    assert RunSpec.from_summary(texts.summary()) == RunSpec.from_summary(typed.summary())


def test_a_long_value_is_kept_by_its_start_and_digest_and_compared_exactly() -> None:
    long = "-XX:+UseG1GC " + "-Dk=v " * 40
    run = RunSpec.from_summary(
        _definition(True, **{"spark.driver.extraJavaOptions": long}).summary()
    )
    setting = run.setting("spark.driver.extraJavaOptions")
    assert setting is not None and setting.value is None and setting.sha256 == digest(long)
    assert setting.differs(long) is False and setting.differs(f" {long} ") is False
    assert setting.differs(long + "-Dz=1") is True
    assert (run.conf_shown() or "").startswith("spark.driver.extraJavaOptions=-XX:+UseG1GC")


def test_the_settings_that_decide_are_kept_first_and_the_handle_fits() -> None:
    conf = {f"spark.app.k{i:02d}": "v" * MAX_VALUE_BYTES for i in range(40)}
    conf["spark.driver.extraJavaOptions"] = "-Dx=1"
    conf["spark.master"] = "local[2]"
    run = RunSpec.of(conf, {"zone": "a"})
    assert run.stored_bytes() <= MAX_RUN_BYTES and run.more > 0
    assert run.setting("spark.driver.extraJavaOptions") == SparkSetting(
        "spark.driver.extraJavaOptions", "-Dx=1"
    )
    assert run.setting("spark.master") is not None
    assert len(run.spark) + run.more == len(conf)
    assert (run.conf_shown() or "").endswith("…")
    definition = _definition(True, **conf)
    Handle.for_payload(PayloadRef("file:///x", 1, "0" * 64), "w" * 100, definition.summary())


@pytest.mark.parametrize(
    "text",
    [
        "[]",
        '{"require": {"zone": 1}}',
        '{"require": {"zone": "a b"}}',
        '{"spark": {"k": 3}}',
        '{"spark": {"k": {"start": "x", "sha256": "zz"}}}',
        '{"more": -1}',
        '{"more": true}',
        '{"lifecycle": []}',
        '{"lifecycle": {"timeout": "soon"}}',
        '{"lifecycle": {"timeout": -1}}',
        '{"lifecycle": {"timeout": true}}',
        '{"lifecycle": {"deadline": 5}}',
        '{"lifecycle": {"notify": 3}}',
        '{"after": ["a"]}',
        '{"after": {"a": "DONE"}}',
        '{"after": {"../x": "SUCCEEDED"}}',
        '{"after": {"a": 1}}',
        "not json",
    ],
)
def test_garbled_run_options_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        RunSpec.from_summary({RUN: text})


def test_a_garbled_older_requirement_is_refused() -> None:
    with pytest.raises(ValueError):
        RunSpec.from_summary({"require": "zone"})
    assert RunSpec.from_summary({}) == RunSpec()


def test_the_stored_form_is_plain_json() -> None:
    run = RunSpec.of({"spark.master": "local[1]", "spark.a.token": "t"}, {"zone": "a"})
    assert json.loads(run.to_json()) == {
        "require": {"zone": "a"},
        "spark": {"spark.a.token": None, "spark.master": "local[1]"},
    }


def test_a_handle_with_typed_run_options_is_refused_by_a_reader_of_an_older_protocol(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A handle that keeps the ``run`` field is of format 4 (the protocol of feature run-spec):
    a reader that speaks protocol 2 (release 0.2.0) raises NewerRecord for it, as it does for
    every newer writer's record, instead of reading a job without its requirements and Spark
    settings (it had neither ``require`` nor ``conf`` to show). Older handles stay format 1."""
    ref = PayloadRef("file:///x", 1, "0" * 64)
    typed = Handle.for_payload(ref, "w", _definition(True).summary()).to_bytes()
    older = Handle.for_payload(ref, "w", _definition(False).summary()).to_bytes()
    assert json.loads(typed)["format"] == RUN_FORMAT == 4
    assert json.loads(older)["format"] == FORMAT == 1
    assert Handle.parse(typed, "/h").summary[RUN] == _definition(True).summary()[RUN]
    monkeypatch.setattr(protocol, "PROTOCOL", 2)
    with pytest.raises(NewerRecord, match="written at fleet protocol 4"):
        Handle.parse(typed, "/h")
    assert Handle.parse(older, "/h").summary["require"] == "gpu=yes,zone=a"


@pytest.mark.parametrize(
    "change",
    [{"format": 1}, {"format": 4, "run": None}, {"format": 2}],
    ids=["run-as-format-1", "format-4-without-run", "format-2"],
)
def test_a_handle_whose_format_is_not_its_writers_is_garbage(change: dict[str, object]) -> None:
    ref = PayloadRef("file:///x", 1, "0" * 64)
    record = json.loads(Handle.for_payload(ref, "w", _definition(True).summary()).to_bytes())
    record.update(change)
    record = {k: v for k, v in record.items() if v is not None}
    with pytest.raises(CorruptHandle, match="unknown format"):
        Handle.parse(json.dumps(record).encode(), "/h")


URL = "https://hooks.example.com/T1/B2/secret"
LIFECYCLE = {"timeout": 7200.0, "retry_delay": 10.0, "retry_jitter": 0.1, "notify": URL}
AFTER = (Dependency("extract-1"), Dependency("load", "ENDED"))


def _with_lifecycle(typed: bool) -> JobDefinition:
    return JobDefinition.for_function(
        "j1", _job, require={"zone": "a"}, lifecycle=LIFECYCLE, typed_run=typed
    )


def _job(ctx: object) -> None:
    return None


def test_the_lifecycle_options_and_dependencies_are_part_of_the_typed_value() -> None:
    definition = _with_lifecycle(True)
    run = definition.run.with_after(AFTER)
    summary = {**definition.summary(), **run.summary_fields()}
    assert not set(LIFECYCLE) & summary.keys() and "after" not in summary
    assert json.loads(summary[RUN]) == {
        "require": {"zone": "a"},
        "lifecycle": LIFECYCLE,
        "after": {"extract-1": "SUCCEEDED", "load": "ENDED"},
    }
    read = RunSpec.from_summary(Handle.parse(_handle(summary).to_bytes(), "/h").summary)
    assert read == run
    assert read.lifecycle == LifecycleOptions(
        timeout=7200.0, retry_delay=10.0, retry_jitter=0.1, notify=URL
    )
    assert read.lifecycle.has_limits and read.after == AFTER
    assert run_options_shown(read.lifecycle)["notify"] == "https://hooks.example.com/..."


def test_an_older_handles_flat_keys_read_into_the_same_typed_value() -> None:
    """A handle written before protocol 4 (or before the fleet was finalized at it) keeps the
    lifecycle options and ``after`` as flat keys: read at the same boundary into the same
    value as the new form."""
    typed, flat = _with_lifecycle(True), _with_lifecycle(False)
    old = {**flat.summary(), **flat.run.with_after(AFTER).summary_fields(typed=False)}
    assert RUN not in old and old["timeout"] == 7200.0 and old["notify"] == URL
    assert old["after"] == "extract-1:SUCCEEDED,load:ENDED"
    new = {**typed.summary(), **typed.run.with_after(AFTER).summary_fields()}
    assert RunSpec.from_summary(old) == RunSpec.from_summary(new)
    # as 0.2.0 wrote them: integers, and a value no writer writes, ignored as every release did
    older = {"require": "zone=a", "timeout": 7200, "retry_delay": "soon", "notify": URL}
    assert RunSpec.from_summary(older).lifecycle == LifecycleOptions(timeout=7200.0, notify=URL)


def test_a_garbled_older_dependency_is_refused_as_before() -> None:
    with pytest.raises(ValueError):
        RunSpec.from_summary({"after": "a"})  # no state


def test_a_definition_refuses_a_lifecycle_option_that_is_not_one() -> None:
    with pytest.raises(ConfigError, match="unknown lifecycle options"):
        JobDefinition.for_function("j1", _job, lifecycle={"deadline": 5.0})
    with pytest.raises(ConfigError, match="timeout"):
        JobDefinition.for_function("j1", _job, lifecycle={"timeout": "soon"})


def _handle(summary: dict[str, object]) -> Handle:
    return Handle.for_payload(PayloadRef("file:///x", 1, "0" * 64), "w", summary)  # type: ignore[arg-type]
