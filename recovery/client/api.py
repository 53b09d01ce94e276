"""The HA submit wrapper, from Python: ``Client`` and ``submit``.

A submission is accepted as soon as it is durable in the store (payload written, handle
published), whether or not a leader is up; the leader starts it when there is one. A job id that
ever had a result can never run again.

::

    from recovery import Client

    with Client() as client:                           # ZKSTORE_* environment or defaults
        job_id = client.submit_file("etl.py:run", args=["2026-11-21"])
        result = client.wait(job_id)                   # JobEnd: outcome, attempts, error

Why one module: it is the public Python API (``Client``, ``submit``, ``RunOptions``) that the
README documents, one import for a user; what it builds on (the job file's target and module,
what is shipped with it, the submission's one publish path in :mod:`zkstore.jobs.graph`) lives
apart.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Unpack

from recovery.client.jobfile import (
    check_script_runs,
    importable,
    job_id_or_default,
    load_function,
    parse_target,
)
from recovery.client.spark_dependencies import Dependencies, Shipment, check_arguments, prepare
from recovery.shared.pickling import is_user_module, pickled_by_value
from zkstore.closing import Closeable
from zkstore.cluster import Cluster, triage
from zkstore.cluster import fleet_protocol as fleet
from zkstore.cluster.pools import check_name, read_pools
from zkstore.config import StoreConfig
from zkstore.errors import (
    ConfigError,
    CorruptRecord,
    HandleExists,
    HandleNotFound,
    JobFinished,
    JobQuarantined,
    PayloadError,
    WaitTimeout,
)
from zkstore.jobs.definition import FUNCTION, ORIGIN, JobDefinition
from zkstore.jobs.definition import origin as code_origin
from zkstore.jobs.dependencies import check_after, format_after, parse_after
from zkstore.jobs.resubmit import differences, fingerprint, idempotent_job_id
from zkstore.jobs.runoptions import LIFECYCLE_KEYS
from zkstore.jobs.runspec import DEFAULT_POOL, RunOptions
from zkstore.jobs.snapshot import JobSnapshot, read_snapshot
from zkstore.jobs.stored import stored_summary
from zkstore.policy import ClusterPolicy
from zkstore.protocol import ARGUMENTS_APART, FEATURES, POOLS, RUN_SPEC
from zkstore.records.fleet_records import LeaderInfo
from zkstore.records.handle import SummaryValue
from zkstore.records.job_records import CancelRequest
from zkstore.records.job_states import CLEAN
from zkstore.records.record import read_record
from zkstore.records.result_records import JobResult
from zkstore.records.strict import time_text

__all__ = ["Client", "JobEnd", "RunOptions", "submit"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class JobEnd:
    """How a job ended, as :meth:`Client.wait` returns it: what happened to the job
    (``outcome``: SUCCEEDED, FAILED or CANCELLED; ``attempts``; ``error``), never the store's
    bookkeeping. ``cleaned_up`` says whether the store has released what the job owned yet
    (its result record says DIRTY until then): it is done by the leader after the end, and
    needs nothing from the caller."""

    job_id: str
    outcome: str
    attempts: int
    finished: str
    error: str | None = None
    name: str | None = None
    #: where the log of the last attempt is (a URI)
    log: str | None = None
    #: the artifacts a SUCCEEDED job kept (name: URI)
    outputs: Mapping[str, Any] | None = None
    #: the daemon the last attempt was placed on
    daemon: str | None = None
    #: attempts that failed, and attempts lost to the infrastructure (None: not recorded)
    failures: int | None = None
    lost: int | None = None
    cleaned_up: bool = False

    @classmethod
    def of(cls, result: JobResult) -> JobEnd:
        return cls(
            job_id=result.job_id,
            outcome=result.outcome,
            attempts=result.attempts,
            finished=time_text(result.finished),
            error=result.error,
            name=result.name,
            log=result.log,
            outputs=result.outputs,
            daemon=result.daemon,
            failures=result.failures,
            lost=result.lost,
            cleaned_up=result.state == CLEAN,
        )


#: Seconds a client keeps the cluster's published settings before it reads them again (a
#: leader that took office with other flags publishes other ones).
POLICY_EVERY = 30.0


class Client(Closeable):
    """Submit, follow and cancel jobs. Use as a context manager, or call :meth:`close`."""

    def __init__(self, config: StoreConfig | None = None, *, cluster: Cluster | None = None):
        self._owns = cluster is None
        self.cluster = cluster or Cluster.open(config or StoreConfig.from_env())
        #: what a submission may write (a stale reading writes an older protocol's way)
        self.fleet = fleet.FleetReading(self.cluster.zk, self.cluster.layout)
        #: the policy last read, and when (monotonic seconds)
        self._policy: tuple[float, ClusterPolicy] | None = None

    @property
    def policy(self) -> ClusterPolicy:
        """The cluster's settings as its leader published them, or, for a cluster without them,
        this process's environment (:mod:`zkstore.cluster.cluster_settings`). Read again after
        :data:`POLICY_EVERY` seconds, and at every use while there is no record: a client made
        as a new cluster's first leader takes office (before it publishes) kept checking
        against its own environment for its whole life, and so refused what the leader allows
        (a benchmark's notification to 127.0.0.1, which the daemons allowed)."""
        now = time.monotonic()
        if (
            self._policy is None
            or self._policy[1].record is None
            or (now - self._policy[0] > POLICY_EVERY)
        ):
            cluster = self.cluster
            self._policy = (now, ClusterPolicy.read(cluster.zk, cluster.layout, cluster.config))
        return self._policy[1]

    def check_definition(self, definition: JobDefinition) -> None:
        """Refuse at once (exit 2, the leader's words) what the leader would not do for the job
        of ``definition``: a notification it would drop, a ``--progress-timeout`` under its
        least."""
        lifecycle = definition.run.lifecycle
        self.policy.check_notify(lifecycle.notify)
        if lifecycle.progress_timeout is not None:
            self.policy.check_progress_timeout(lifecycle.progress_timeout)

    def close(self) -> None:
        if self._owns:
            self.cluster.close()

    # -- submitting ----------------------------------------------------------------------------

    def submit(
        self,
        definition: JobDefinition,
        *,
        after: Sequence[str] = (),
        source: str | None = None,
        args: Sequence[Any] | None = None,
        origin: str | None = None,
    ) -> str:
        """Store ``definition``; returns its job id once it is durable.

        ``after`` (``JOB[:STATE]``, STATE SUCCEEDED by default, FAILED, CANCELLED or ENDED):
        the job stays PENDING until those jobs ended so, and fails if one ended otherwise.

        Submitting is idempotent: if the id exists (current, finished or quarantined) with the
        same definition and options, that job's id is returned; with another, :class:`HandleExists`
        (exit 5) names the difference. For a function job, ``source`` (its module's text) and
        ``args`` make a retry from another process recognizable (pickled code differs between
        processes). An id of the form ``<schedule>-<window>`` of an existing schedule is refused.
        ``origin`` (:func:`~zkstore.jobs.definition.origin`) says where the code came from.
        """
        job_id = definition.job_id
        self.check_definition(definition)
        dependencies = check_after(job_id, [parse_after(text) for text in after])
        waits_for = format_after(dependencies) if dependencies else None
        extra: dict[str, SummaryValue] = {}
        if dependencies:  # in the run options (fleet protocol 4), else flat as before
            run = definition.run.with_after(dependencies)
            extra.update(run.summary_fields(typed=definition.typed_run))
        extra.update(fingerprint(definition, source=source, args=args, after=waits_for))
        if origin is not None:
            extra[ORIGIN] = origin
        self._refuse_schedule_run_id(job_id)
        try:
            self.cluster.jobs.submit(definition, summary=extra)
        except (HandleExists, JobFinished, JobQuarantined) as exc:
            existing = stored_summary(self.cluster.zk, self.cluster.layout, job_id)
            found = ["it cannot be read"] if existing is None else []
            found = found or differences(
                existing or {}, {**definition.summary(), **extra}, also=LIFECYCLE_KEYS
            )
            found = found or self._not_authentic(job_id)
            if found:  # the same error class (exit 5), saying how this submission differs
                said = f"job {job_id} exists already" if type(exc) is HandleExists else str(exc)
                raise type(exc)(
                    f"{said}; this submission differs from it: {'; '.join(found)}", path=exc.path
                ) from None
            logger.info("%s was submitted already, with the same definition", job_id)
            return job_id
        logger.info("submitted %s (%s)", job_id, definition.entry_point)
        return job_id

    def _not_authentic(self, job_id: str) -> list[str]:
        """Why the live job ``job_id`` is not one a client of this cluster submitted (its
        payload does not verify: under its prefix, size, sha256, its job's signature), as a
        job's code that planted the id with this submission's summary would make it; empty if
        it is (or it is no longer live: its result or quarantine entry is the leader's)."""
        try:
            handle = self.cluster.jobs.handles.get_handle(job_id)
            self.cluster.jobs.verify_definition(job_id, handle)
        except HandleNotFound:
            return []
        except PayloadError as exc:
            return [f"its definition does not verify ({exc}): it was not submitted by a client"]
        return []

    def _refuse_schedule_run_id(self, job_id: str) -> None:
        """A plain submission may not take the id of a schedule's future (or past) run."""
        match = re.fullmatch(r"(.+)-\d{8}T\d{6}Z", job_id)
        if match is None:
            return
        try:
            exists = (
                self.cluster.zk.exists(self.cluster.layout.schedule(match.group(1))) is not None
            )
        except ConfigError:
            return  # not a schedule's name
        if exists:
            raise ConfigError(
                f"{job_id} is the id of a run of schedule {match.group(1)}: the schedule makes "
                "its runs; choose another --job-id"
            )

    def submit_function(
        self,
        function: Callable[..., Any],
        *args: Any,
        job_id: str | None = None,
        name: str | None = None,
        conf: Mapping[str, str] | None = None,
        needs: Dependencies | None = None,
        after: Sequence[str] = (),
        **run: Unpack[RunOptions],
    ) -> str:
        """Submit ``function(ctx, *args)``. Its module travels by value unless installed, with
        the modules it imports from its directory and the files in ``needs``; ``after`` as
        :meth:`submit` takes it; ``run``: the run options (:class:`RunOptions`:
        ``max_attempts``, ``max_lost_attempts``, ``require``, ``pool``, ``lifecycle``)."""
        module = sys.modules.get(getattr(function, "__module__", "") or "")
        by_value = module if module is not None and is_user_module(module) else None
        origin = getattr(by_value, "__file__", None)
        definition = self._definition(
            _Function(function, by_value),
            args,
            shipment=prepare(Path(origin) if origin else None, needs or Dependencies(), conf),
            job_id=job_id_or_default(job_id, getattr(function, "__name__", "job")),
            name=name,
            run=run,
        )
        source = _source_of(Path(origin)) if origin else None
        name_of = getattr(function, "__qualname__", None)
        where = code_origin(str(Path(origin).resolve()), name_of) if origin else None
        return self.submit(definition, after=after, source=source, args=args, origin=where)

    def submit_script(
        self,
        path: str | os.PathLike[str],
        args: Sequence[str] = (),
        *,
        job_id: str | None = None,
        name: str | None = None,
        conf: Mapping[str, str] | None = None,
        needs: Dependencies | None = None,
        **run: Unpack[RunOptions],
    ) -> str:
        """Submit an unmodified PySpark script (restarted from scratch after a failure), with
        the modules it imports from its directory and the files in ``needs``; ``run`` as
        :meth:`submit_function` takes it."""
        script = Path(path)
        return self.submit(
            self._definition(
                script,
                args,
                shipment=prepare(script, needs or Dependencies(), conf),
                job_id=job_id,
                name=name,
                run=run,
            ),
            origin=code_origin(str(script.resolve())),
        )

    def submit_file(
        self,
        target: str,
        args: Sequence[str] = (),
        *,
        after: Sequence[str] = (),
        idempotency_key: str | None = None,
        **options: Any,
    ) -> str:
        """Submit ``FILE.py`` (a script) or ``FILE.py:FUNCTION`` (``FUNCTION(ctx, *args)``);
        ``options`` as :meth:`definition_for_file` takes them, ``after`` as :meth:`submit`.

        ``idempotency_key`` gives the job an id derived from the file (and function) and the key
        instead of a random one: every retry with the key names the same job, which
        :meth:`submit` returns if it exists with the same definition.
        """
        path, function = parse_target(target)
        if idempotency_key is not None:
            if options.get("job_id") is not None:
                raise ConfigError("give --job-id or --idempotency-key, not both")
            stem = path.stem if function is None else f"{path.stem}-{function}"
            options["job_id"] = idempotent_job_id(stem, idempotency_key)
        definition = self.definition_for_file(target, args, **options)
        source = None if function is None else _source_of(path)
        return self.submit(
            definition,
            after=after,
            source=source,
            args=list(args),
            origin=code_origin(str(path.resolve()), function),
        )

    def definition_for_file(
        self,
        target: str,
        args: Sequence[str] = (),
        *,
        job_id: str | None = None,
        name: str | None = None,
        conf: Mapping[str, str] | None = None,
        needs: Dependencies | None = None,
        check_paths: bool = True,
        warn: Callable[[str], None] | None = None,
        **run: Unpack[RunOptions],
    ) -> JobDefinition:
        """The definition of ``FILE.py`` (a script) or ``FILE.py:FUNCTION``
        (``FUNCTION(ctx, *args)``), checked and ready to submit (or to schedule).

        Relative paths in ``args`` that exist here are refused unless they name a shipped file
        (the job runs in its own directory, elsewhere); with ``check_paths=False`` they are
        passed as they are. ``warn`` receives the warnings (default: the log); ``run`` as
        :meth:`submit_function` takes it.
        """
        checked = (
            (lambda names: check_arguments(args, names, warn or logger.warning))
            if (check_paths)
            else None
        )
        return self._definition_of_file(
            target, args, conf=conf, needs=needs, job_id=job_id, name=name, run=run, check=checked
        )

    def file_definition(
        self,
        target: str,
        args: Sequence[str] | None,
        *,
        current: JobDefinition,
        conf: Mapping[str, str] | None = None,
        needs: Dependencies | None = None,
    ) -> JobDefinition:
        """The definition ``FILE.py[:FUNCTION]`` makes for the existing job ``current`` (its
        id, name and options kept): new code for ``zkstore jobs resume --definition``. ``args``
        None keeps the job's arguments: a script's (text), or a function job's pickled apart
        from its code (fleet protocol 2), taken over as bytes: nothing of the job is unpickled
        here (:class:`ConfigError` for arguments that travel inside a function's old code, or a
        function's for a script). Not stored: see
        :meth:`zkstore.lifecycle.stopstore.StopStore.resume`."""
        if args is None and parse_target(target)[1] is None and current.kind == FUNCTION:
            raise ConfigError(
                f"job {current.job_id}'s arguments are a function's (pickled): give the "
                "script's arguments after --"
            )
        return self._definition_of_file(
            target,
            current.args if args is None else args,
            conf=conf,
            needs=needs,
            job_id=current.job_id,
            name=current.name,
            run=current.run_options(),
            kept=current if args is None and current.kind == FUNCTION else None,
        )

    def redefinition_summary(
        self,
        definition: JobDefinition,
        target: str,
        args: Sequence[str] | None,
        *,
        after: SummaryValue = None,
    ) -> dict[str, SummaryValue]:
        """The summary keys that ``definition``, made from ``target`` by
        :meth:`file_definition` for ``jobs resume --definition``, carries beside its own: its
        fingerprint (the same source and arguments give the same, in any process: the same code
        resumed again is recognized) and its origin. ``after``: the job's dependencies as its
        summary has them (they are part of its options)."""
        path, function = parse_target(target)
        if function is None:
            found = fingerprint(definition, after=after if isinstance(after, str) else None)
        else:
            # arguments kept from the job travel pickled apart: their bytes stand for them
            kept: list[Any] = list(args) if args else [definition.arguments or b""]
            found = fingerprint(
                definition,
                source=_source_of(path),
                args=kept,
                after=after if isinstance(after, str) else None,
            )
        found[ORIGIN] = code_origin(str(path.resolve()), function)
        return found

    def _definition_of_file(
        self,
        target: str,
        args: Sequence[Any],
        *,
        conf: Mapping[str, str] | None,
        needs: Dependencies | None,
        job_id: str | None,
        name: str | None,
        run: RunOptions,
        check: Callable[[set[str]], None] | None = None,
        kept: JobDefinition | None = None,
    ) -> JobDefinition:
        """``FILE.py[:FUNCTION]``'s definition: its files prepared, its module imported (with
        its own directory importable) only as long as it takes to pickle the function."""
        path, function_name = parse_target(target)
        shipment = prepare(path, needs or Dependencies(), conf)
        if check is not None:
            check(shipment.names())
        if function_name is None:
            return self._definition(
                path, args, shipment=shipment, job_id=job_id, name=name, run=run
            )
        with importable(path.parent, shipment.import_paths):
            function, module = load_function(path, function_name)
            try:
                return self._definition(
                    _Function(function, module),
                    args,
                    shipment=shipment,
                    job_id=job_id_or_default(job_id, f"{path.stem}-{function_name}"),
                    name=name if name is not None else f"{path.name}:{function_name}",
                    run=run,
                    kept=kept,
                )
            finally:
                sys.modules.pop(module.__name__, None)

    def _definition(
        self,
        what: Path | _Function,
        args: Sequence[Any],
        *,
        shipment: Shipment,
        job_id: str | None,
        name: str | None,
        run: RunOptions,
        kept: JobDefinition | None = None,
    ) -> JobDefinition:
        """The one definition builder: a script (its path) or a function, with its shipment
        and run options; a function job's ``kept`` arguments taken over (see
        :meth:`file_definition`)."""
        self._check_size(shipment)
        typed_run = self.fleet.allows(RUN_SPEC)
        pool = run.get("pool")
        if pool is not None and pool != DEFAULT_POOL:
            # a pool an older leader would ignore: refused until the fleet is at 4
            fleet.require(self.cluster.zk, self.cluster.layout, FEATURES[POOLS])
            if check_name(pool) not in read_pools(self.cluster.zk, self.cluster.layout):
                raise HandleNotFound(
                    f"no pool {pool!r}: zkstore pools set {pool} --max-running N makes it "
                    "(zkstore pools list)"
                )
        if isinstance(what, _Function):
            with pickled_by_value(what.by_value):
                return JobDefinition.for_function(
                    job_id_or_default(job_id, getattr(what.function, "__name__", "job")),
                    what.function,
                    args=args,
                    name=name,
                    apart=self.fleet.allows(ARGUMENTS_APART),
                    kept=kept,
                    spark_conf=shipment.spark_conf,
                    files=shipment.files,
                    typed_run=typed_run,
                    **run,
                )
        try:
            source = what.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{what}: cannot read it: {exc}") from exc
        try:
            compile(source, str(what), "exec")
        except SyntaxError as exc:
            raise ConfigError(f"{what}:{exc.lineno}: syntax error: {exc.msg}") from exc
        check_script_runs(what, source)
        return JobDefinition.for_script(
            job_id_or_default(job_id, what.stem),
            source,
            filename=str(what.resolve()),
            args=[str(arg) for arg in args],
            name=name if name is not None else what.name,
            spark_conf=shipment.spark_conf,
            files=shipment.files,
            typed_run=typed_run,
            **run,
        )

    def _check_size(self, shipment: Shipment) -> None:
        limit = self.cluster.config.max_payload_bytes
        if shipment.size > limit:
            raise ConfigError(
                f"the files to ship come to {shipment.size / 1e6:.1f} MB, over the payload limit "
                f"of {limit / 1e6:.1f} MB: put big files where the driver's host can read them "
                "and pass their URIs"
            )

    # -- following -----------------------------------------------------------------------------

    def status(self, job_id: str) -> JobSnapshot:
        """What the store says about the job now; :class:`JobNotFound` if nothing."""
        return read_snapshot(self.cluster.zk, self.cluster.layout, job_id)

    def leader(self) -> LeaderInfo | None:
        """The published record of the leading daemon (``daemon_id``, ``host``, ``pid``,
        ``since``), or None when no daemon leads (then submitted jobs wait). Raises
        :class:`CorruptRecord` if the record is garbage."""
        return read_record(self.cluster.zk, LeaderInfo, self.cluster.layout.leader_info)

    def wait(
        self,
        job_id: str,
        *,
        timeout: float | None = None,
        on_change: Callable[[JobSnapshot], None] | None = None,
        on_leader: Callable[[LeaderInfo | None], None] | None = None,
    ) -> JobEnd:
        """Block until the job has a result and return how it ended.

        ``on_change`` sees every change of the job's state, attempt or Spark application (for
        progress output); ``on_leader`` sees the leader (or None: no daemon leads, the job
        waits) first and at every change while the job is not finished. Raises
        :class:`WaitTimeout` after ``timeout`` seconds, :class:`JobNotFound` if the job vanished
        without a result, and :class:`JobQuarantined` if it went to quarantine (it will never
        end by itself).
        """
        changed = threading.Event()
        layout, zk = self.cluster.layout, self.cluster.zk
        paths = [
            layout.result(job_id),
            layout.running(job_id),
            layout.status(job_id),
            layout.outcome(job_id),
            layout.spark(job_id),
            layout.control_ack(job_id),  # PAUSED
            layout.leader_info,
        ]
        end = None if timeout is None else time.monotonic() + timeout
        last_state: tuple[str, int | None, str | None] | None = None
        last_leader: object = ()

        def wake(event: object) -> None:
            changed.set()

        while True:
            changed.clear()
            leader_stat = zk.exists_many(paths, watch=wake)[-1]
            snapshot = self.status(job_id)
            app = snapshot.spark.app_id if snapshot.spark is not None else None
            state = (snapshot.state, snapshot.attempt, app)
            if on_change is not None and state != last_state:
                last_state = state
                on_change(snapshot)
            if snapshot.result is not None:
                return JobEnd.of(snapshot.result)
            if snapshot.quarantine is not None:
                raise JobQuarantined(
                    f"job {job_id} is quarantined and will not run: {snapshot.quarantine.reason}"
                )
            leader_key = None if leader_stat is None else leader_stat.czxid
            if on_leader is not None and leader_key != last_leader:
                last_leader = leader_key
                self._tell_leader(on_leader, leader_stat is not None)
            remaining = None if end is None else end - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise WaitTimeout(f"job {job_id} did not finish within {timeout:g} s")
            # Watches make this immediate; the bound covers a watch lost to a reconnect.
            changed.wait(5.0 if remaining is None else min(5.0, remaining))

    def _tell_leader(self, on_leader: Callable[[LeaderInfo | None], None], present: bool) -> None:
        """Call ``on_leader`` with the leader's record; an unreadable one is logged instead (a
        daemon leads, its record says nothing we can show)."""
        try:
            leader = self.leader() if present else None
        except CorruptRecord as exc:
            logger.warning("the leader's record is unreadable: %s", exc)
            return
        on_leader(leader)

    def cancel(self, job_id: str, *, reason: str | None = None) -> CancelRequest:
        """Ask the job to stop; a quarantined job ends at once as CANCELLED (its data removed).
        Raises :class:`JobNotFound`, or :class:`JobFinished` if it has a result already."""
        return triage.cancel(self.cluster, job_id, reason=reason)


@dataclass(frozen=True)
class _Function:
    """A function to submit, and its module if its code must travel by value."""

    function: Callable[..., Any]
    by_value: ModuleType | None


def _source_of(path: Path) -> str | None:
    """The text of a function job's module (its fingerprint's code); None if unreadable."""
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError):
        return None


def submit(
    target: str | Callable[..., Any],
    *args: Any,
    wait: bool = False,
    config: StoreConfig | None = None,
    **options: Any,
) -> str | JobEnd:
    """Submit ``"FILE.py[:FUNCTION]"`` or a function; with ``wait``, return its result."""
    with Client(config) as client:
        if callable(target):
            job_id = client.submit_function(target, *args, **options)
        else:
            job_id = client.submit_file(target, [str(a) for a in args], **options)
        return client.wait(job_id) if wait else job_id
