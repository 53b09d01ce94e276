"""The longest full ZooKeeper outage a running job survives (issue: production hardening).

A three-server ensemble (tick 2000 ms), one daemon at the default session timeout (10 s) and
three fresh checkpointing jobs per trial (a checkpoint every 0.2 s). Each trial takes the whole
ensemble away for a while, waits two session timeouts and asks, per job: is its first attempt
still the only one, and still making progress? The daemon's log says how the others ended.

- ``frozen``: every server SIGSTOPped for D seconds (a stalled disk, a paused VM): connections
  stay open, nothing answers.
- ``crashed``: every server SIGKILLed, restarted after D seconds: connections are refused until
  the servers are back, which takes their start-up and an election on top of D.
- ``cut``: every connection to every server dropped and refused for D seconds (a
  :class:`~zkstore_dev.blackout.Blackout` between the clients and the ensemble): what clients see
  of a full outage of any length, without the servers' restart time.

Printed per trial: the outage as the clients saw it and how many of the jobs kept their attempt.
Not a pass/fail benchmark: the README's operating section quotes the numbers.
"""

from __future__ import annotations

import signal
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import Result
from recovery.client.api import Client
from recovery.dev.localcluster import LocalCluster
from zkstore.config import DEFAULT_SESSION_TIMEOUT, StoreConfig
from zkstore_dev.blackout import Blackout
from zkstore_dev.chaos import job
from zkstore_dev.ensemble import ZooKeeperEnsemble

JOBS = 3
TRIALS = {
    "cut": (1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0),
    "frozen": (2.0, 4.0, 5.0, 6.0, 8.0),
    "crashed": (0.0, 2.0),
}


def outage(ensemble: ZooKeeperEnsemble, blackout: Blackout, mode: str, seconds: float) -> float:
    """Take every server away for ``seconds``; return how long the ensemble did not serve."""
    start = time.monotonic()
    if mode == "cut":
        return blackout.cut_for(seconds)
    for n, member in ensemble.members.items():
        if mode == "frozen":
            member.signal(signal.SIGSTOP)
        else:
            ensemble.kill_member(n)
    time.sleep(seconds)
    for n, member in ensemble.members.items():
        if mode == "frozen":
            member.signal(signal.SIGCONT)
        else:
            ensemble.start_member(n)
    ensemble.wait_serving(timeout=120)
    return time.monotonic() - start


def trial(
    ensemble: ZooKeeperEnsemble,
    blackout: Blackout,
    run: tuple[Client, LocalCluster, Path],
    mode: str,
    seconds: float,
) -> str:
    """Fresh jobs, one outage, then: which first attempts are still alive and progressing?"""
    client, local, work = run
    outs = {}
    for n in range(1, JOBS + 1):
        job_id = f"{mode}-{seconds:g}-{n}".replace(".", "_")
        outs[job_id] = work / "out" / job_id
        client.submit_function(
            job.sum_of_squares, str(outs[job_id]), None, 0.2, job_id=job_id, max_attempts=100
        )
    end = time.monotonic() + 120
    while not all(len(job.progress_times(o)) >= 5 for o in outs.values()):
        if time.monotonic() > end:
            raise TimeoutError("the jobs did not start")
        time.sleep(0.1)
    took = outage(ensemble, blackout, mode, seconds)
    healed = time.time()
    time.sleep(2 * DEFAULT_SESSION_TIMEOUT)
    kept = [
        j
        for j, out in outs.items()
        if [a.attempt for a in job.attempts(out)] == [1]
        and max(job.progress_times(out), default=0) > healed
    ]
    for out in outs.values():
        (out / job.STOP).touch()
    ended = {
        line.split(") ", 1)[-1]
        for line in local.daemons["d1"].log().splitlines()
        if "recovery.member.fleetmember" in line
        and any(f"driver of {j} attempt 1 " in line for j in outs)
    }
    why = "; ".join(sorted(ended)) or "-"
    line = (
        f"{mode:8s} outage {took:5.1f} s: {len(kept)} of {len(outs)} first attempts kept "
        f"(ended: {why})"
    )
    print(line, flush=True)
    return line


def main(argv: list[str]) -> list[Result]:
    with (
        tempfile.TemporaryDirectory(prefix="zkstore-outage-") as scratch,
        ZooKeeperEnsemble(
            tick_time_ms=2000, work_dir=Path(scratch) / "zk", short_jvm=False
        ) as ensemble,
        Blackout(ensemble.connect_string) as blackout,
    ):
        work = Path(scratch)  # removed with all it holds once the ensemble has stopped
        config = StoreConfig(
            zk_hosts=blackout.connect_string,
            root="/outage",
            storage_url=f"file://{work}/storage",
            session_timeout=DEFAULT_SESSION_TIMEOUT,
        )
        local = LocalCluster(config, work / "rt")
        try:
            local.start_daemon("d1")
            local.wait_for_leader(timeout=60)
            # --smoke: one short trial, to prove the benchmark runs
            trials = {"cut": (1.0,)} if "--smoke" in argv else TRIALS
            modes = [a for a in argv if a in trials] or list(trials)
            with Client(config) as client:
                for mode in modes:
                    for seconds in trials[mode]:
                        trial(ensemble, blackout, (client, local, work), mode, seconds)
        finally:
            local.stop()
    return []


if __name__ == "__main__":
    main(sys.argv[1:])
