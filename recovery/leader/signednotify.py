"""A job's own notification URL as its signed definition says it, not as its handle does.

``submit --notify URL`` travels twice: in the definition (its ``lifecycle``, inside the payload
the job's key signs) and in the handle's summary (which the leader reads without opening a
payload). The summary is not signed: a writer of the handle alone could point a job's events
(its name, its errors) at a host of its choosing. So before the leader writes a job's events to
the outbox for the URL its summary names, it checks that URL against the signed definition
(read and verified once per payload, then remembered): the events go to the definition's URL;
a summary that names another is refused, and the leader's log says so (once a minute per job).

A summary without a URL is taken at its word (no payload is read for the jobs that ask for no
notification): a writer of the handle can keep a job's events from its own URL, never send them
elsewhere. The daemons' own ``--notify`` URLs are theirs, not a job's, and not checked here.
"""

from __future__ import annotations

import logging

from zkstore.errors import PayloadError, StoreUnavailable
from zkstore.jobs.graph import JobGraphStore
from zkstore.jobs.snapshot import JobSnapshot
from zkstore.jobs.stops import redact_url
from zkstore.lifecycle.options import NOTIFY_KEY
from zkstore.zookeeper.throttle import Throttle

__all__ = ["MAX_REMEMBERED", "SignedNotify"]

logger = logging.getLogger(__name__)

#: Jobs whose signed URL is remembered; past it, forgotten all at once (read again when needed).
MAX_REMEMBERED = 10_000


class SignedNotify:
    """The notification URL of each job, checked against its signed definition. Leader thread
    only."""

    def __init__(self, jobs: JobGraphStore) -> None:
        self._jobs = jobs
        #: job id -> (its handle's payload, the URL its definition says: None for none)
        self._signed: dict[str, tuple[str, str | None]] = {}
        self._said = Throttle(logger)

    def url(self, job: JobSnapshot) -> str | None:
        """Where the job's own events go: the URL its signed definition says, if its summary
        names one; None if it names none, if the definition says none or cannot be verified
        (the summary's URL is then refused, and the log says why)."""
        shown = job.run.lifecycle.notify if job.run is not None else None
        handle = job.handle
        if shown is None or handle is None:
            # no handle: the summary is the leader's own copy (result, quarantine entry)
            return shown
        key = f"{handle.uri} {handle.sha256}"
        known = self._signed.get(job.job_id)
        if known is None or known[0] != key:
            try:
                definition = self._jobs.verify_definition(job.job_id, handle)
            except StoreUnavailable as exc:
                self._refuse(job.job_id, shown, f"its definition could not be read ({exc})")
                return None
            except PayloadError as exc:
                self._refuse(job.job_id, shown, f"its definition cannot be trusted ({exc})")
                return None
            value = dict(getattr(definition, "lifecycle", None) or {}).get(NOTIFY_KEY)
            if len(self._signed) >= MAX_REMEMBERED:
                self._signed.clear()
            known = (key, value if isinstance(value, str) and value else None)
            self._signed[job.job_id] = known
        signed = known[1]
        if signed != shown:
            self._refuse(
                job.job_id,
                shown,
                "its signed definition says "
                + (f"{redact_url(signed)}: its events go there" if signed else "none"),
            )
        return signed

    def _refuse(self, job_id: str, shown: str, why: str) -> None:
        self._said.log(
            job_id,
            logging.WARNING,
            "job %s: not notifying %s, the URL its handle names: %s (a handle is not signed; "
            "resubmit the job to change its --notify)",
            job_id,
            redact_url(shown),
            why,
        )
