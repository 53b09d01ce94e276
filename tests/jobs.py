"""Job functions the end-to-end tests submit (they travel to the drivers by value).

Each records what it did as files in an output directory, so that tests can check which steps
ran, in which attempt, and at what time.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any


def noop(ctx: Any) -> None:
    """A job that does nothing."""
    return None


def mark(out: str, name: str, **data: Any) -> None:
    """Record ``name`` atomically (temp file + rename): the test may read it at any moment."""
    Path(out).mkdir(parents=True, exist_ok=True)
    temporary = Path(out) / f".{name}.{os.getpid()}"
    temporary.write_text(json.dumps({"time": time.time(), **data}))
    temporary.replace(Path(out) / name)


#: How many steps past its ``total`` a gated :func:`steps` job goes on before it gives up.
GATE_STEPS = 2000


def steps(ctx: Any, out: str, total: int, delay: float, gate: str | None = None) -> None:
    """Work through ``total`` steps, checkpointing after each; record every step started.

    With ``gate`` (a file), it goes on stepping past ``total`` until that file exists: a test
    that kills a host or a driver while the job runs opens the gate after the kill, so that the
    job cannot have finished before it however slowly the test itself was scheduled.
    """
    checkpoint = ctx.latest_checkpoint()
    step = checkpoint["step"] + 1 if checkpoint else 1
    mark(out, f"start-attempt-{ctx.attempt}", step=step)
    while step <= total or (gate is not None and not os.path.exists(gate)):
        if step > total + GATE_STEPS:
            raise TimeoutError(f"the gate {gate} never opened")
        mark(out, f"step-{step:03d}-attempt-{ctx.attempt}", pid=os.getpid())
        time.sleep(delay)
        ctx.checkpoint({"step": step})
        step += 1


def flaky(ctx: Any, out: str, succeed_at: int) -> None:
    """Fail until attempt ``succeed_at``; record when each attempt started."""
    mark(out, f"attempt-{ctx.attempt}")
    if ctx.attempt < succeed_at:
        raise RuntimeError(f"attempt {ctx.attempt} fails on purpose")


def sleeper(ctx: Any, out: str, seconds: float) -> None:
    mark(out, f"attempt-{ctx.attempt}")
    end = time.time() + seconds
    while time.time() < end:
        time.sleep(0.05)
    mark(out, "finished")


def spark_squares(ctx: Any, out: str, n: int) -> None:
    """A real Spark job: the sum of squares of 0..n-1, computed by the cluster."""
    total = ctx.spark.range(n).selectExpr("sum(id * id) AS total").collect()[0]["total"]
    mark(out, "result", total=int(total), master=ctx.spark.sparkContext.master)


def read_marks(out: str) -> dict[str, dict[str, Any]]:
    return {p.name: json.loads(p.read_text()) for p in sorted(Path(out).glob("[!.]*"))}


def wait_for_go(ctx: Any, out: str) -> None:
    """Wait until the job's dynamic configuration says go (``zkstore control set JOB go=true``)."""
    mark(out, "waiting")
    deadline = time.time() + 60
    while not ctx.config.get("go"):
        if time.time() > deadline:
            raise TimeoutError("never told to go")
        time.sleep(0.05)
    mark(out, "went", rate=ctx.config.get("rate"))


def environment(ctx: Any, out: str) -> None:
    """Record the driver's environment, as the job's code sees it."""
    mark(out, "environ", environ=dict(os.environ))


def printer(ctx: Any, out: str, lines: int, then_sleep: float) -> None:
    """Print numbered lines (and a partial last one), mark, then sleep (to be killed)."""
    for i in range(lines):
        print(f"attempt {ctx.attempt} line {i:05d}", flush=True)
    print(f"attempt {ctx.attempt} last words", flush=True)
    mark(out, f"printed-{ctx.attempt}")
    time.sleep(then_sleep)
    if ctx.attempt == 1 and then_sleep < 60:
        raise RuntimeError("attempt 1 fails on purpose")


# -- control (tests/test_control_e2e.py) ----------------------------------------------------------


def tunable(ctx: Any, out: str) -> None:
    """Declares its keys, refuses unknown modes, records every configuration it runs with and
    every change its handler saw, answers checkpoint requests; ends when told to stop."""
    ctx.declare_config(
        {"rate": float, "mode": str, "parts": int, "stop": bool}, needs_restart=["parts"]
    )

    def on_change(change: Any) -> None:
        mode = change.new.get("mode")
        if "mode" in change.keys and mode not in (None, "fast", "slow"):
            change.reject("mode", f"unknown mode {mode!r}")
        mark(out, f"change-{change.version:04d}", keys=list(change.keys), old=dict(change.old))

    ctx.on_config_change(on_change)
    mark(out, "declared", attempt=ctx.attempt)
    seen = None
    deadline = time.time() + 300
    while not ctx.config.get("stop") and time.time() < deadline:
        now = (ctx.config_version, dict(ctx.config))
        if now != seen and now[0] is not None:
            seen = now
            mark(out, f"config-{now[0]:04d}", values=now[1])
        if ctx.checkpoint_requested:
            checkpoint = ctx.checkpoint({"answered": True})
            mark(out, "answered", checkpoint=checkpoint)
        ctx.raise_if_cancelled()
        time.sleep(0.02)


def stepper(ctx: Any, out: str, total: int, delay: float) -> None:
    """Steps with a checkpoint after each (where a paused job blocks), recording the control
    version in effect and the one its resumed checkpoint was taken under."""
    checkpoint = ctx.latest_checkpoint()
    start = checkpoint["step"] + 1 if checkpoint else 1
    mark(
        out,
        f"start-attempt-{ctx.attempt}",
        step=start,
        config_version=ctx.config_version,
        checkpoint_config_version=ctx.checkpoint_config_version,
        rate=ctx.config.get("rate"),
    )
    for step in range(start, total + 1):
        mark(
            out,
            f"step-{step:03d}-attempt-{ctx.attempt}",
            rate=ctx.config.get("rate"),
            config_version=ctx.config_version,
        )
        time.sleep(delay)
        ctx.checkpoint({"step": step})


def log_levels(ctx: Any, out: str) -> None:
    """Starts Spark, then records the driver's Python level and Spark's root log level (as the
    JVM has it) whenever they change; ends when told to stop."""
    jvm = ctx.spark.sparkContext._jvm
    seen = None
    deadline = time.time() + 300
    while not ctx.config.get("stop") and time.time() < deadline:
        spark = str(jvm.org.apache.logging.log4j.LogManager.getRootLogger().getLevel().toString())
        now = (logging.getLevelName(logging.getLogger().level), spark)
        if now != seen:
            seen = now
            mark(out, f"levels-{now[0]}-{now[1]}", python=now[0], spark=now[1])
        time.sleep(0.05)


def spark_scratch(ctx: Any, out: str) -> None:
    """Attempt 1 starts Spark, shuffles (the block manager writes files), records where Spark
    keeps its scratch and waits to be killed; a later attempt returns at once."""
    if ctx.attempt > 1:
        return
    context = ctx.spark.sparkContext
    pairs = context.parallelize(range(1000), 4).map(lambda i: (i % 7, i))
    assert len(pairs.reduceByKey(lambda a, b: a + b).collect()) == 7
    tmpdir = str(context._jvm.System.getProperty("java.io.tmpdir"))
    mark(out, "scratch", pid=os.getpid(), tmpdir=tmpdir, names=sorted(os.listdir(tmpdir)))
    threading.Event().wait()


#: How long a gated :func:`jvm_report` waits for its gate before it fails.
JVM_REPORT_GATE = 300.0


def jvm_report(
    ctx: Any,
    out: str,
    keys: list[str] | None = None,
    properties: list[str] | None = None,
    gate: str | None = None,
) -> None:
    """Run a Spark action and record what its driver JVM says of itself through the gateway:
    its pid, the class-data archives it maps (``/proc/<pid>/maps``), its working directory and
    user, the Spark settings ``keys`` (its SparkConf) and the system properties ``properties``,
    and the gateway's secret (which the job holds: the tests look for it elsewhere). With
    ``gate``, the job then waits for that file before it ends (its ``spark`` record stays)."""
    spark = ctx.spark
    total = spark.range(100).selectExpr("sum(id)").collect()[0][0]
    context = spark.sparkContext
    jvm = context._jvm
    pid = int(jvm.java.lang.ProcessHandle.current().pid())
    maps = Path(f"/proc/{pid}/maps").read_text()
    status = Path(f"/proc/{pid}/status").read_text().splitlines()
    uid = next(line.split()[1] for line in status if line.startswith("Uid:"))
    mark(
        out,
        f"jvm-{ctx.attempt}",
        pid=pid,
        uid=int(uid),
        archives=sorted({line.split()[-1] for line in maps.splitlines() if line.endswith(".jsa")}),
        cwd=os.readlink(f"/proc/{pid}/cwd"),
        own_cwd=os.getcwd(),
        conf={key: context.getConf().get(key, None) for key in keys or []},
        properties={name: jvm.java.lang.System.getProperty(name) for name in properties or []},
        master=context.master,
        app=context.appName,
        total=int(total),
        secret=context._gateway.gateway_parameters.auth_token,
    )
    if gate is not None:
        deadline = time.time() + JVM_REPORT_GATE
        while not os.path.exists(gate):
            if time.time() > deadline:
                raise TimeoutError(f"{gate} never appeared")
            time.sleep(0.05)


def files_then_spark(ctx: Any, out: str) -> None:
    """Write a file in the attempt's directory, then :func:`jvm_report`, then record whether
    the file is still where the job left it (``kept``)."""
    Path("before.txt").write_text("made before Spark")
    jvm_report(ctx, out)
    mark(out, "kept", text=Path("before.txt").read_text(), cwd=os.getcwd())


def jvm_report_own_options(ctx: Any, out: str, how: str, option: str) -> None:
    """Start Spark the way a job's own code may, with the JVM option ``option`` (a system
    property ``zkstore.test``), then :func:`jvm_report`: set in ``SparkSession.builder``
    (``how`` "builder"), or in ``PYSPARK_SUBMIT_ARGS`` ("submit-args") before the builder."""
    import shlex

    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master("local[1]")
    if how == "builder":
        builder = builder.config("spark.driver.extraJavaOptions", option)
    else:
        os.environ["PYSPARK_SUBMIT_ARGS"] = shlex.join(
            ["--conf", f"spark.driver.extraJavaOptions={option}", "pyspark-shell"]
        )
    builder.getOrCreate()
    jvm_report(ctx, out, ["spark.driver.extraJavaOptions"], ["zkstore.test"])
