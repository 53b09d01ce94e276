"""A job's lifecycle options: the command line (the CLI's one duration parser), the handle
summary they travel in (small, tolerant when read back), and a definition redefined for a
resume (zkstore.lifecycle.options, recovery.cli.lifecycle_options, zkstore.lifecycle.redefine)."""

from __future__ import annotations

import json
from typing import Any

import click
import pytest
from click.testing import CliRunner

from recovery.cli.lifecycle_options import Limit, lifecycle_from, lifecycle_options, stop_options
from recovery.cli.types import Duration
from zkstore.errors import ConfigError
from zkstore.jobs.definition import JobDefinition
from zkstore.lifecycle.attempt_limits import Limits
from zkstore.lifecycle.lifecycle_records import MAX_URL_BYTES, redact_url, url_problem
from zkstore.lifecycle.options import SUMMARY_KEYS, Lifecycle
from zkstore.lifecycle.redefine import redefined
from zkstore.lifecycle.retry_backoff import RetryPolicy
from zkstore.records.handle import MAX_HANDLE_BYTES, Handle, PayloadRef

pytestmark = pytest.mark.unit


@click.command()
@lifecycle_options
def submit(**options: Any) -> None:
    click.echo(json.dumps(lifecycle_from(options).summary(), sort_keys=True))


@click.command()
@stop_options
def stop(checkpoint: bool, checkpoint_timeout: float) -> None:
    click.echo(json.dumps([checkpoint, checkpoint_timeout]))


def run(command: click.Command, *args: str) -> Any:
    result = CliRunner().invoke(command, list(args))
    return result


def test_the_options_parse_durations_as_the_cli_does() -> None:
    result = run(
        submit,
        *("--timeout", "2h", "--start-timeout", "90s", "--progress-timeout", "10m"),
        *("--retry-delay", "10s", "--retry-max-delay", "15m", "--retry-jitter", "0.1"),
        *("--retry-reset-after", "1h", "--lost-retry-delay", "1", "--lost-retry-max-delay", "2m"),
        *("--notify", "https://hooks.example.com/T1/B2/secret"),
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {
        "timeout": 7200.0,
        "start_timeout": 90.0,
        "progress_timeout": 600.0,
        "retry_delay": 10.0,
        "retry_max_delay": 900.0,
        "retry_jitter": 0.1,
        "retry_reset_after": 3600.0,
        "lost_retry_delay": 1.0,
        "lost_retry_max_delay": 120.0,
        "notify": "https://hooks.example.com/T1/B2/secret",
    }


def test_the_same_words_as_every_other_duration_option() -> None:
    for text in ("90s", "10m", "2h", "1d", "45", "1.5h"):
        assert Limit().convert(text, None, None) == Duration().convert(text, None, None)
    assert Limit().convert("off", None, None) == 0.0


def test_defaults_take_no_room_in_the_summary() -> None:
    result = run(submit)
    assert result.exit_code == 0 and json.loads(result.output) == {}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--timeout", "soon"), "is not a duration"),
        (("--retry-jitter", "1.5"), "1.5"),
        (("--progress-timeout", "5s"), "at least 30 s"),
        (("--retry-delay", "10m", "--retry-max-delay", "1m"), "max delay"),
        (("--notify", "ftp://x/y"), "http:// or https://"),
        (("--notify", "https://user:pw@x/y"), "credentials"),
    ],
)
def test_bad_options_are_usage_errors(args: tuple[str, ...], message: str) -> None:
    result = run(submit, *args)
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_a_delay_above_the_default_max_raises_the_max_with_it() -> None:
    lifecycle = Lifecycle().with_options(retry_delay=600)
    assert (lifecycle.retry.failures.delay, lifecycle.retry.failures.max_delay) == (600, 600)


def test_resume_keeps_what_is_not_given_and_off_removes_a_limit() -> None:
    current = Lifecycle().with_options(timeout=3600, progress_timeout=120, notify="http://h/x")
    changed = lifecycle_from({"timeout": 0.0, "retry_delay": 1.0, "notify": ""}, base=current)
    assert changed.limits == Limits(timeout=None, progress_timeout=120)
    assert changed.retry.failures.delay == 1.0 and changed.notify is None


def test_the_summary_reads_back_and_garbage_is_ignored_not_raised() -> None:
    lifecycle = Lifecycle().with_options(
        timeout=60, retry_reset_after=0, lost_retry_max_delay=10, notify="http://127.0.0.1:9/n"
    )
    back, problems = Lifecycle.from_summary(lifecycle.summary())
    assert back == lifecycle and problems == []
    assert back.retry.reset_after is None
    garbage = {"timeout": "soon", "retry_jitter": 7, "notify": 3, "progress_timeout": 1, "x": 1}
    back, problems = Lifecycle.from_summary(garbage)
    assert back == Lifecycle() and len(problems) == 4


def test_the_summary_keys_keep_a_handle_small() -> None:
    url = "https://hooks.example.com/" + "x" * (MAX_URL_BYTES - len("https://hooks.example.com/"))
    lifecycle = Lifecycle().with_options(
        **{k: 3600.5 for k in SUMMARY_KEYS if k not in ("notify", "retry_jitter")},
        retry_jitter=0.35,
        notify=url,
    )
    summary = lifecycle.summary()
    assert len(json.dumps(summary)) < 700
    definition = JobDefinition.for_script(
        "j" * 128, "print(1)", filename="f" * 200 + ".py", name="n" * 100
    )
    ref = PayloadRef(uri="file:///" + "s" * 300, size=1, sha256="a" * 64)
    handle = Handle.for_payload(ref, "w" * 40, {**definition.summary(), **summary})
    assert len(handle.to_bytes()) < MAX_HANDLE_BYTES


def test_urls_are_checked_and_shown_redacted() -> None:
    assert url_problem("https://h.example.com/a?b=c") is None
    assert url_problem("http://h:notaport/x") is not None
    assert url_problem("https://h/x y") is not None
    assert url_problem("https://h/" + "x" * MAX_URL_BYTES) is not None
    assert redact_url("https://hooks.example.com/services/T0/B0/SECRET") == (
        "https://hooks.example.com/..."
    )
    assert redact_url("http://127.0.0.1:8080") == "http://127.0.0.1:8080"


def test_stop_options() -> None:
    assert json.loads(run(stop).output) == [False, 300.0]
    given = run(stop, "--checkpoint", "--checkpoint-timeout", "2m")
    assert json.loads(given.stdout) == [True, 120.0] and not given.stderr


def test_stop_timeout_is_the_old_spelling_of_checkpoint_timeout() -> None:
    """Issue 49: one meaning per flag name: ``jobs stop --timeout`` (the checkpoint's wait)
    is deprecated for ``--checkpoint-timeout``; still taken, with a warning."""
    old = CliRunner().invoke(stop, ["--checkpoint", "--timeout", "2m"])
    assert json.loads(old.stdout) == [True, 120.0]
    assert "use --checkpoint-timeout" in old.stderr


def test_lifecycle_validates_what_it_holds() -> None:
    with pytest.raises(ConfigError):
        Lifecycle(notify="not a url")
    assert Lifecycle().retry == RetryPolicy()


def job(name: str, *args: Any) -> JobDefinition:
    def run_it(ctx: Any, *a: Any) -> None:
        return None

    return JobDefinition.for_function("pipeline", run_it, args=args, name=name, max_attempts=2)


def test_redefined_takes_new_code_and_keeps_the_job() -> None:
    current = job("daily", "in", "out")
    new = JobDefinition.for_script("pipeline", "print(2)", filename="v2.py", args=["a"])
    changed = redefined(current, new, max_attempts=5, spark_conf={"k": "v"})
    assert (changed.job_id, changed.name, changed.submitted) == (
        "pipeline",
        "daily",
        current.submitted,
    )
    assert (changed.kind, changed.source, changed.args, changed.code) == (
        "script",
        "print(2)",
        ("a",),
        None,
    )
    assert changed.max_attempts == 5 and dict(changed.spark_conf) == {"k": "v"}
    assert redefined(current, None, max_attempts=None) == current


def test_redefined_refuses_another_jobs_code_and_unknown_options() -> None:
    other = JobDefinition.for_script("other", "print(1)", filename="x.py")
    with pytest.raises(ConfigError, match="not 'pipeline'"):
        redefined(job("daily"), other)
    with pytest.raises(ConfigError, match="not an option"):
        redefined(job("daily"), None, name="x")


def test_one_list_of_lifecycle_keys_and_a_flag_for_each() -> None:
    """docs/design.md: a new lifecycle option touches zkstore/jobs/runoptions.py (its key, in
    the one list, and its typed field: what the handle's run options, ``jobs show``,
    ``schedules update`` and the job snapshot read), zkstore/lifecycle/options.py (how it sets
    the leader's ``Lifecycle``), the module that decides by it and recovery/cli/lifecycle_options.py
    (its flag): a key missing from any of them fails here."""
    import dataclasses

    from recovery.cli.jobs.job_commands import run_option_lines
    from zkstore.jobs import snapshot
    from zkstore.jobs.runoptions import LIFECYCLE_KEYS, LifecycleOptions
    from zkstore.jobs.runspec import RunSpec
    from zkstore.jobs.shown import LIMIT_KEYS, RETRY_KEYS, run_options_shown
    from zkstore.lifecycle.options import NOTIFY_KEY

    assert {*LIMIT_KEYS, *RETRY_KEYS, NOTIFY_KEY} == SUMMARY_KEYS == set(LIFECYCLE_KEYS)
    assert {f.name for f in dataclasses.fields(LifecycleOptions)} == SUMMARY_KEYS
    assert snapshot.LIMIT_KEYS is LIMIT_KEYS
    assert {p.name for p in submit.params if isinstance(p, click.Option)} == SUMMARY_KEYS
    every = {k: 0.5 if k == "retry_jitter" else 3600.0 for k in (*LIMIT_KEYS, *RETRY_KEYS)}
    every[NOTIFY_KEY] = "https://hooks.example.com/x"
    for key, value in every.items():  # each one sets the leader's Lifecycle
        assert Lifecycle().with_options(**{key: value}) != Lifecycle(), key
    typed = RunSpec.of({}, {}, lifecycle=every)
    assert RunSpec.from_json(typed.to_json()).lifecycle.given() == every
    assert RunSpec.from_summary(every).lifecycle == typed.lifecycle  # the flat form, as before
    shown = run_option_lines(run_options_shown(LifecycleOptions(**dict.fromkeys(LIMIT_KEYS, 60))))
    assert shown["limits"] == ", ".join(f"--{k.replace('_', '-')} 60s" for k in LIMIT_KEYS)
