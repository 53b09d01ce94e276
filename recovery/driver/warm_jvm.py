"""The attempt's Spark driver JVM: a warm one its daemon handed over, or its own.

pyspark starts a driver's JVM in ``launch_gateway`` (``spark-submit ... pyspark-shell``), the
first time the job builds a SparkContext (``ctx.spark``, or a script's own
``SparkSession.builder``). This module puts itself in front of that call (:meth:`SparkJvm.install`)
and decides there, with every setting the job gave Spark (its ``--conf``, a script's own
builder options, ``PYSPARK_SUBMIT_ARGS``):

- **warm**: its master is one a warm JVM serves, its JVM-level settings are the ones the warm
  JVMs were started with (:mod:`recovery.shared.jvm_settings`), and it has one: asked of its daemon
  now, at the job's first use of Spark, through its channel (``--warm-fd``, with
  :class:`~recovery.shared.jvm_settings.WarmAsk` on the configuration pipe:
  :mod:`recovery.member.warm_jvms.asks`; the answer brings the gateway's port and secret, the
  JVM's standard input and its log, and the JVM's directory is the attempt's), or taken at its
  launch with ``--driver-user`` (:mod:`recovery.member.warm_jvms.pool`: its gateway's port and
  secret came through the configuration pipe, its standard input as ``--warm-fd``): pyspark
  connects to it, the system properties ``spark-submit`` would have set (the job's ``--conf``,
  master, name, submission time) are set in it, and the context is built there;
- **cold** otherwise, saying why: pyspark starts the attempt's own JVM as before, with the
  deployment's ``spark-defaults.conf`` as ``--properties-file`` and the class-data archive in
  its options unless its class path differs (then it loads Spark's classes from the jars, and
  the log says why). A warm JVM taken and not used is let go at once. An attempt its daemon
  launched without one (its job's summary showed a JVM-level setting the warm JVMs lack:
  ``declined``) says so, and whether its own settings agree.

Which it got is in the driver's log, in the attempt's ``spark`` record while it runs, and in its
outcome (:meth:`SparkJvm.had`), which the leader keeps in the job's history (``zkstore jobs
show``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shlex
import signal
import socket
import threading
import time
from collections.abc import Callable, Mapping, MutableMapping
from pathlib import Path
from typing import Any

from recovery.shared.jvm_settings import (
    ARCHIVE_ENV,
    ASK,
    JVM_LEVEL,
    PROPERTIES_ENV,
    WARM_ENV,
    SubmitArgs,
    WarmAsk,
    WarmOffer,
    class_path_reason,
    jvm_reason,
    master_reason,
    parse_properties,
    parse_submit_args,
    quote_option,
)
from recovery.shared.processes import Liveness, ProcessIdentity, boot_id, probe
from recovery.shared.sparkconf import is_local_master, loopback_ui
from zkstore.config import ENV_VARS

__all__ = ["ASK_TIMEOUT", "SUBMIT_ARGS", "SUBMIT_OPTS", "SparkJvm", "WarmProcess"]

logger = logging.getLogger(__name__)

#: Seconds the daemon has to answer an ask for a warm JVM (it renames and truncates files).
ASK_TIMEOUT = 30.0
#: How often the warm JVM's new output is copied into the attempt's log.
RELAY_PERIOD = 0.25

SUBMIT_ARGS = "PYSPARK_SUBMIT_ARGS"
SUBMIT_OPTS = "SPARK_SUBMIT_OPTS"


class WarmProcess:
    """The warm JVM as pyspark's gateway knows its process (``gateway.proc``): what the driver
    kills when it must stop at once (its lease is over). Signals go through a pidfd taken after
    the pid was checked against the JVM's start time: never to another process."""

    def __init__(self, offer: WarmOffer) -> None:
        self.pid = offer.pid
        self._identity = ProcessIdentity(
            socket.gethostname(), offer.pid, offer.start_ticks, boot_id()
        )

    def poll(self) -> int | None:
        return None if probe(self._identity) is Liveness.ALIVE else 0

    def kill(self) -> None:
        try:
            pidfd = os.pidfd_open(self.pid)
        except OSError:
            return
        try:
            if probe(self._identity) is Liveness.ALIVE:
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        finally:
            os.close(pidfd)


class SparkJvm:
    """How this attempt's Spark JVM starts. The job's thread calls :meth:`launch` (through
    pyspark); the driver calls the rest."""

    def __init__(
        self,
        offer: WarmOffer | None,
        warm_fd: int | None,
        environ: MutableMapping[str, str] | None = None,
        *,
        declined: str | None = None,
        ask: WarmAsk | None = None,
        work_dir: Path | None = None,
    ) -> None:
        self.offer = offer if warm_fd is not None else None
        #: why the daemon handed over no warm JVM, from the job's summary (None: it did not say)
        self.declined = declined if self.offer is None else None
        self._fd = warm_fd if offer is not None else None
        #: the channel to ask the daemon for a warm JVM at the job's first use of Spark, once
        self._ask_fd = warm_fd if offer is None and ask is not None else None
        if warm_fd is not None and self._fd is None and self._ask_fd is None:
            with contextlib.suppress(OSError):
                os.close(warm_fd)
        for fd in (self._fd, self._ask_fd):
            if fd is not None:
                os.set_inheritable(fd, False)  # job code's children never hold them
        self.work_dir = work_dir
        self._env = os.environ if environ is None else environ
        self.archive = self._env.get(ARCHIVE_ENV) or None
        self.properties = self._env.get(PROPERTIES_ENV) or None
        self._defaults = (
            dict(offer.defaults)
            if offer is not None
            else dict(ask.defaults)
            if ask is not None
            else self._read_defaults()
        )
        #: seconds the ask for a warm JVM took at first use (None: not asked)
        self.asked: float | None = None
        self._relay_stop = threading.Event()
        self._relay: threading.Thread | None = None
        #: what the attempt got, once its Spark started (None before)
        self.how: str | None = None
        self._given: tuple[str | None, str | None] = (None, None)
        self._master = "local[*]"

    def _read_defaults(self) -> dict[str, str]:
        if self.properties is None:
            return {}
        try:
            found = parse_properties(Path(self.properties).read_text(errors="replace"))
        except OSError:
            return {}
        return {k: v for k, v in found.items() if k in JVM_LEVEL}

    # -- before the job runs ----------------------------------------------------------------

    def submit_args(self) -> list[str]:
        """What spark-submit gets besides the job's own options: the deployment's
        ``spark-defaults.conf`` (a job's ``--conf`` wins over it, as over the file in
        ``SPARK_CONF_DIR``)."""
        return ["--properties-file", self.properties] if self.properties else []

    def prepare(self, job_conf: Mapping[str, str], master: str, submit_args: str | None) -> None:
        """Before the job runs: ``PYSPARK_SUBMIT_ARGS`` (``submit_args``, a script's; else the
        properties file alone), the archive in the JVM options if the job's class path allows
        it, and this object in front of pyspark's ``launch_gateway``."""
        self._master = job_conf.get("spark.master", master)
        args = submit_args or shlex.join([*self.submit_args(), "pyspark-shell"])
        self._env[SUBMIT_ARGS] = args
        self._set_archive(job_conf)
        self._given = (args, self._env.get(SUBMIT_OPTS))
        self.install()

    def install(self) -> None:
        """Put :meth:`launch` in front of pyspark's ``launch_gateway`` (pyspark imported now:
        a fork server's driver has it imported already). Without pyspark, nothing."""
        try:
            from pyspark.core import context as pyspark_context
        except ImportError:
            return
        original: Callable[..., Any] | None = getattr(pyspark_context, "launch_gateway", None)
        if original is None or getattr(original, "zkstore_wrapped", False):
            return

        def launch_gateway(conf: Any = None, popen_kwargs: Any = None) -> Any:
            return self.launch(original, conf, popen_kwargs)

        launch_gateway.zkstore_wrapped = True  # type: ignore[attr-defined]
        setattr(pyspark_context, "launch_gateway", launch_gateway)  # noqa: B010 - untyped

    def _set_archive(self, settings: Mapping[str, str]) -> str | None:
        """Put the archive first in the JVM's options (an operator's own options after it win)
        unless the class path differs; returns why it is not there, or None."""
        opts = self._env.get(SUBMIT_OPTS, "")
        option = quote_option(f"-XX:SharedArchiveFile={self.archive}") if self.archive else ""
        if option and opts.startswith(option):
            opts = opts[len(option) :].lstrip()
        reason = class_path_reason(settings, self._defaults) if self.archive else None
        if self.archive is None:
            reason = "the daemon has no verified class-data archive (yet, or --class-data off)"
        elif reason is None:
            opts = f"{option} {opts}".strip()
        self._env[SUBMIT_OPTS] = opts
        return reason

    # -- when the job starts Spark ------------------------------------------------------------

    def launch(self, original: Callable[..., Any], conf: Any, popen_kwargs: Any) -> Any:
        """pyspark's ``launch_gateway(conf)``: connect to the warm JVM if the attempt can use
        it, else start the attempt's own (``original``)."""
        submit = self._submit_args()
        settings = {**submit.conf, **dict(conf.getAll() if conf is not None else ())}
        reason = self._cold_reason(submit, settings)
        if reason is None:
            assert self.offer is not None
            try:
                gateway = self._connect(original, submit, settings)
            except Exception as exc:  # noqa: BLE001 - whatever py4j raises: the JVM is not usable
                reason = f"warm driver {self.offer.warm_id} did not answer: {exc}"
            else:
                first_use = (
                    f"; taken at first use in {self.asked:.2f} s" if self.asked is not None else ""
                )
                self.how = (
                    f"warm: warm driver {self.offer.warm_id} (pid {self.offer.pid}, "
                    f"warmed in {self.offer.warmed:.1f} s{first_use})"
                )
                logger.info("Spark driver JVM: %s", self.how)
                return gateway
        self.let_go()
        # In local mode its UI (and RPC) listen on loopback only, unless SPARK_LOCAL_IP is set.
        self._env.update(loopback_ui(self._env, self._master_of(submit, settings)))
        archive_reason = self._set_archive(settings)
        classes = (
            f"Spark's classes mapped from {self.archive}"
            if archive_reason is None
            else f"Spark's classes loaded from the jars: {archive_reason}"
        )
        self.how = f"cold: {reason}; {classes}"
        logger.info("Spark driver JVM: its own, %s", self.how)
        return original(conf, popen_kwargs)

    def _submit_args(self) -> SubmitArgs:
        try:
            return parse_submit_args(self._env.get(SUBMIT_ARGS, "pyspark-shell"))
        except ValueError:
            return SubmitArgs(others=("(unreadable)",))

    def _cold_reason(self, submit: SubmitArgs, settings: Mapping[str, str]) -> str | None:
        """Why the attempt starts its own JVM, or None if it can use the warm one (asked of
        its daemon now, if it may ask)."""
        if self.offer is None and self._ask_fd is not None:
            if (self._env.get(SUBMIT_ARGS), self._env.get(SUBMIT_OPTS)) != self._given:
                self._close_ask()
                return (
                    "the job changed PYSPARK_SUBMIT_ARGS or SPARK_SUBMIT_OPTS "
                    "(no warm driver asked for)"
                )
            own = self._settings_reason(submit, settings)
            if own is not None:
                self._close_ask()  # no JVM taken: it stays in the daemon's pool
                return f"{own} (no warm driver asked for)"
            return self._ask()
        if self.offer is None and self.declined is not None:
            own = self._settings_reason(submit, settings)
            if own is not None:
                return f"{own} (its daemon saw it in the job's summary: no warm driver taken)"
            return (
                f"its daemon took no warm driver for it, from the job's summary ({self.declined});"
                " its own settings would have matched"
            )
        if self.offer is None:
            warm = self._env.get(WARM_ENV, "0")
            return (
                "no warm driver was ready for this attempt"
                if warm not in ("", "0")
                else "this daemon keeps no warm drivers (--warm-drivers 0)"
            )
        if (self._env.get(SUBMIT_ARGS), self._env.get(SUBMIT_OPTS)) != self._given:
            return "the job changed PYSPARK_SUBMIT_ARGS or SPARK_SUBMIT_OPTS"
        return self._settings_reason(submit, settings)

    def _settings_reason(self, submit: SubmitArgs, settings: Mapping[str, str]) -> str | None:
        """Why the job's own settings cannot use a warm JVM, or None if they can."""
        if submit.others:
            return f"PYSPARK_SUBMIT_ARGS has {' '.join(submit.others)[:80]} (fixed at JVM launch)"
        master = self._master_of(submit, settings)
        return (
            master_reason(master)
            or self._loopback_reason(master)
            or jvm_reason(settings, self._defaults)
        )

    def _master_of(self, submit: SubmitArgs, settings: Mapping[str, str]) -> str:
        return settings.get("spark.master") or submit.master or self._master

    def _loopback_reason(self, master: str) -> str | None:
        """Why a warm JVM that listens on loopback only (its daemon's master is local mode)
        cannot serve ``master``, whose executors must reach their driver; None if it can."""
        daemon_master = self._env.get(ENV_VARS["spark_master"], "")
        if is_local_master(master) or not loopback_ui(self._env, daemon_master):
            return None
        return f"master {master[:80]}: warm drivers listen on loopback only (local mode)"

    def _connect(
        self, original: Callable[..., Any], submit: SubmitArgs, settings: Mapping[str, str]
    ) -> Any:
        """pyspark's own connection to a running gateway (the variables it reads are set in
        this process's memory for the call only), then the JVM's system properties as
        ``spark-submit`` would have set them."""
        assert self.offer is not None
        self._env["PYSPARK_GATEWAY_PORT"] = str(self.offer.port)
        self._env["PYSPARK_GATEWAY_SECRET"] = self.offer.secret
        try:
            gateway = original(None, None)
        finally:
            self._env.pop("PYSPARK_GATEWAY_PORT", None)
            self._env.pop("PYSPARK_GATEWAY_SECRET", None)
        system = gateway.jvm.java.lang.System
        properties = dict(settings)
        properties["spark.master"] = settings.get("spark.master") or submit.master or self._master
        if submit.name and "spark.app.name" not in settings:
            properties["spark.app.name"] = submit.name
        properties["spark.app.submitTime"] = str(int(time.time() * 1000))
        for key, value in properties.items():
            system.setProperty(key, value)
        gateway.proc = WarmProcess(self.offer)
        return gateway

    # -- a warm JVM at first use --------------------------------------------------------------

    def _ask(self) -> str | None:
        """Ask the daemon for a warm JVM, once: None if it gave one (then :attr:`offer` is
        it, the attempt's directory is the JVM's, its log is copied into the attempt's), else
        why not."""
        fd, self._ask_fd = self._ask_fd, None
        assert fd is not None
        began = time.monotonic()
        data, fds = b"", []
        with socket.socket(fileno=fd) as channel:
            channel.settimeout(ASK_TIMEOUT)
            try:
                channel.sendall(ASK)
                while not data.endswith(b"\n") and len(data) < 1 << 20:
                    chunk, got, _, _ = socket.recv_fds(channel, 1 << 16, 2, socket.MSG_CMSG_CLOEXEC)
                    fds += got
                    if not chunk:
                        break
                    data += chunk
            except OSError as exc:
                _close_all(fds)
                return f"its daemon did not answer the ask for a warm driver ({exc})"
        if not data:
            _close_all(fds)
            return "its daemon closed the channel of warm drivers (it restarted or stops)"
        try:
            answer = json.loads(data)
            if "offer" in answer and len(fds) == 2:
                offer = WarmOffer.from_json(json.dumps(answer["offer"]))
            elif isinstance(answer.get("none"), str):
                _close_all(fds)
                return " ".join(str(answer["none"]).split())[:300]
            else:
                raise ValueError("neither an offer with its descriptors nor a reason")
        except (ValueError, AttributeError) as exc:
            _close_all(fds)
            return f"its daemon's answer about a warm driver is unreadable ({exc})"
        self.offer, self._fd = offer, fds[0]
        self._defaults = dict(offer.defaults)
        self._move_in()
        self._start_relay(fds[1])
        self.asked = time.monotonic() - began
        return None

    def _move_in(self) -> None:
        """The daemon exchanged the attempt's directory and the JVM's: the attempt's path is
        the JVM's directory now. Move what the job made before it asked for Spark (this
        process's current directory, where the JVM's was) there, and go there."""
        if self.work_dir is None:
            return
        for name in os.listdir("."):
            try:
                os.rename(name, self.work_dir / name)
            except OSError as exc:
                logger.warning("%s not moved into the warm driver's directory: %s", name, exc)
        os.chdir(self.work_dir)

    def _start_relay(self, log_fd: int) -> None:
        """Copy the warm JVM's output (its own log, which it appends to) into this attempt's
        log (this process's standard error) until the attempt ends."""

        def relay() -> None:
            try:
                while True:
                    data = os.read(log_fd, 1 << 16)
                    if data:
                        _write_all(2, data)
                    elif self._relay_stop.wait(RELAY_PERIOD):
                        while data := os.read(log_fd, 1 << 16):
                            _write_all(2, data)
                        return
            except OSError:
                return
            finally:
                with contextlib.suppress(OSError):
                    os.close(log_fd)

        self._relay = threading.Thread(target=relay, name="warm-jvm-log", daemon=True)
        self._relay.start()

    def _close_ask(self) -> None:
        if self._ask_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._ask_fd)
            self._ask_fd = None

    def let_go(self) -> None:
        """The warm JVM is not this attempt's Spark (it starts cold, or never started Spark):
        end it now rather than when the attempt ends."""
        if self._fd is None or self.offer is None:
            return
        with contextlib.suppress(OSError):
            os.close(self._fd)  # its gateway exits when its standard input ends
        self._fd = None
        if self.how is None or not self.how.startswith("warm"):
            WarmProcess(self.offer).kill()

    def had(self) -> str:
        """What the attempt had, for its outcome (one line): ``warm: ...``, ``cold: <why>``,
        or ``none: ...`` when its job asked for no Spark."""
        how = self.how or "none: the job started no Spark (no driver JVM)"
        return " ".join(how.split())

    def close(self) -> None:
        """The attempt is over: a warm JVM it took and never used is let go (one it used ends
        with this process, which holds its standard input)."""
        self._close_ask()  # never asked: the warm JVMs stay in the daemon's pool
        if self.how is None and self.offer is not None:
            logger.info("warm driver %s not used: the job started no Spark", self.offer.warm_id)
            self.let_go()
        if self._relay is not None:
            self._relay_stop.set()
            self._relay.join(timeout=RELAY_PERIOD * 8)


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
