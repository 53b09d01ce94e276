"""What each zkstore process imports, and what it costs (issue 57): the installed script's CPU
per command, against an embedded ZooKeeper, beside a bare kazoo client's in the same run.

For ``--help``, ``jobs list``, ``jobs show``, ``submit``, ``schedules list`` and ``daemons
list``: the CPU (user + system, from the kernel's accounting of the child) of each round's
command and of the baseline run right after it (``python -c`` that imports kazoo's client,
connects, lists the cluster's ``currentJobs`` and closes: the least a command that reads
ZooKeeper does), their medians and the median of the per-round ratios; and the milliseconds of
imports the command's process spends (``PYTHONPROFILEIMPORTTIME=1``: the sum of each module's
own time, median of the rounds) with the number of modules it imports.

For a daemon (``zkstore daemon``, no warm driver) and its fork server: the daemon's CPU from its
start until its log says ``daemon ... up``, and its fork server's once it has imported what a
forked driver needs (its CPU no longer grows), read from ``/proc``; beside the same baseline.

``python -m benchmarks imports --rounds 5`` (the default). The figures are for
docs/benchmarks.md; the tests hold the import sets (tests/command_line/test_cli_answers_at_once.py),
never a time.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.common import Result, file_config, show_all, zookeeper
from recovery.dev.localcluster import LocalCluster
from zkstore.config import StoreConfig

BASELINE = """
import sys
from kazoo.client import KazooClient
client = KazooClient(hosts=sys.argv[1], timeout=10)
client.start(timeout=30)
client.get_children(sys.argv[2] + "/currentJobs")
client.stop()
client.close()
"""

#: Goals, as ratios to the bare client: a command that reads ZooKeeper costs at most 2.5 times a
#: bare kazoo client's process; a daemon and its fork server, what they are measured at now.
COMMAND_GOAL = "<= 2.5"
DAEMON_GOAL = "<= 8.0"
FORK_GOAL = "<= 4.0"

STARTS = (("zkstore daemon (until 'daemon ... up')", DAEMON_GOAL), ("its fork server", FORK_GOAL))

JOB = "def run(ctx):\n    pass\n"

#: Each command measured: its name as printed, and its words (``{job}`` a job of the cluster,
#: ``{file}`` the job file).
COMMANDS = (
    ("--help", ["--help"]),
    ("jobs list", ["jobs", "list"]),
    ("jobs show", ["jobs", "show", "{job}"]),
    ("submit", ["submit", "{file}:run"]),
    ("schedules list", ["schedules", "list"]),
    ("daemons list", ["daemons", "list"]),
)


def zkstore() -> str:
    return str(Path(sys.executable).parent / "zkstore")


def cpu_of(argv: list[str], env: dict[str, str]) -> tuple[float, str]:
    """CPU seconds of one whole process (it must exit 0) and its stderr."""
    with tempfile.TemporaryFile() as err:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=err, env=env)  # fmt: skip
        _, status, usage = os.wait4(process.pid, 0)
        err.seek(0)
        text = err.read().decode(errors="replace")
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{argv} failed: {text[-2000:]}")
    return usage.ru_utime + usage.ru_stime, text


def import_ms(stderr: str) -> tuple[float, int]:
    """The milliseconds of imports ``-X importtime`` printed (each module's own time, summed)
    and how many modules."""
    own = [
        int(parts[0].split(":")[1])
        for parts in (line.split("|") for line in stderr.splitlines())
        if len(parts) == 3 and parts[1].strip().isdigit()
    ]
    return sum(own) / 1000, len(own)


def bench_command(
    name: str, argv: list[str], baseline: list[str], env: dict[str, str], rounds: int
) -> Result:
    timed = {**env, "PYTHONPROFILEIMPORTTIME": "1"}
    cpu_of(argv, env)  # the page cache warm for both
    ours, base, imports, modules = [], [], [], 0
    for _ in range(rounds):
        ours.append(cpu_of(argv, env)[0])
        base.append(cpu_of(baseline, env)[0])
        ms, modules = import_ms(cpu_of(argv, timed)[1])
        imports.append(ms)
    return Result.of_runs(
        f"zkstore {name}: CPU (vs a bare kazoo connect-and-list)",
        ours,
        base,
        COMMAND_GOAL,
        detail=f"imports {statistics.median(imports):.0f} ms, {modules} modules; medians of "
        f"{rounds}, interleaved; load {os.getloadavg()[0]:.2f}",
    )


def cpu_now(pid: int) -> float:
    """CPU seconds so far of process ``pid`` (``/proc/PID/stat``: utime and stime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with open(task / "children") as f:
            found += [int(c) for c in f.read().split()]
    return found


def wait_until(what: str, check: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.05)


def daemon_start(env: dict[str, str], daemon_id: str, timeout: float) -> tuple[float, float]:
    """The CPU of ``zkstore daemon`` until it says it is up, and of its fork server once that
    is ready (its CPU unchanged over half a second)."""
    process = subprocess.Popen(
        [zkstore(), "daemon", "--id", daemon_id, "--warm-drivers", "0"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert process.stderr is not None
        for line in process.stderr:
            if f"daemon {daemon_id} up" in line:
                break
        else:
            raise RuntimeError(f"daemon {daemon_id} ended before it was up")
        daemon_cpu = cpu_now(process.pid)

        def fork_server() -> int | None:
            for child in children(process.pid):
                if b"forkserver" in Path(f"/proc/{child}/cmdline").read_bytes():
                    return child
                if "fork-server" in Path(f"/proc/{child}/cmdline").read_text(errors="replace"):
                    return child
            return None

        wait_until("a fork server", lambda: fork_server() is not None, timeout)
        server = fork_server()
        assert server is not None
        seen = [-1.0]

        def settled() -> bool:
            now = cpu_now(server)
            if now == seen[0]:
                return True
            seen[0] = now
            time.sleep(0.5)
            return False

        wait_until("the fork server ready", settled, timeout)
        return daemon_cpu, seen[0]
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def bench_daemon(
    env: dict[str, str], baseline: list[str], rounds: int, timeout: float
) -> list[Result]:
    starts, bases = [], []
    for i in range(rounds):
        starts.append(daemon_start(env, f"bench-imports-{i}", timeout))
        bases.append(cpu_of(baseline, env)[0])
    return [
        Result.of_runs(
            f"{what}: CPU to ready (vs a bare kazoo connect-and-list)",
            [s[index] for s in starts],
            bases,
            goal,
            detail=f"medians of {rounds}; load {os.getloadavg()[0]:.2f}",
        )
        for index, (what, goal) in enumerate(
            (
                ("zkstore daemon (until 'daemon ... up')", DAEMON_GOAL),
                ("its fork server", FORK_GOAL),
            )
        )
    ]


def prepare(config: StoreConfig, tmp: Path) -> tuple[dict[str, str], str]:
    """Three jobs and a schedule in ``config``'s cluster; the commands' environment and the
    job file."""
    env = LocalCluster(config, tmp).environment()
    env.pop("PYTHONPROFILEIMPORTTIME", None)
    job = tmp / "job.py"
    job.write_text(JOB)
    for words in (
        *(["submit", f"{job}:run", "--job-id", f"bench-{i}"] for i in range(3)),
        ["schedules", "create", "nightly", f"{job}:run", "--every", "1h"],
    ):
        cpu_of([zkstore(), *words], env)
    return env, str(job)


def main(argv: list[str] | None = None) -> list[Result]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--daemon-rounds", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=120.0, help="of each daemon's start")
    args = parser.parse_args(argv)
    results: list[Result] = []
    with zookeeper() as hosts, tempfile.TemporaryDirectory() as tmp:
        config = file_config(hosts, tmp)
        env, job = prepare(config, Path(tmp))
        baseline = [sys.executable, "-c", BASELINE, hosts, config.base_path]
        for name, words in COMMANDS:
            command = [zkstore(), *(w.format(job="bench-0", file=job) for w in words)]
            results.append(bench_command(name, command, baseline, env, args.rounds))
        results += bench_daemon(env, baseline, args.daemon_rounds, args.timeout)
    return show_all(results)


if __name__ == "__main__":
    main()
