"""What the driver raises into a job to end its attempt from inside.

:class:`JobCancelled` is public (``recovery.JobCancelled``): a job may catch it to tidy up, and
should let it go. Neither is raised anywhere but in the driver process.
"""

from __future__ import annotations

from zkstore.errors import FenceLost

__all__ = ["AttemptSuperseded", "JobCancelled"]


class JobCancelled(Exception):
    """Raised inside the job once a cancel was requested (by ``ctx.checkpoint`` and friends)."""


class AttemptSuperseded(FenceLost):
    """This attempt lost its standing (session expired, or a newer attempt was assigned)."""
