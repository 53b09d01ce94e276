"""``zkstore jobs``: every verb of the noun, one module per group of verbs (imported together).

::

    job_commands.py     the ``jobs`` group; jobs list | show | cancel | forget
    job_logs.py         jobs logs: a job's driver logs, read from storage on any host
    job_wait.py         jobs wait (and the following of ``submit --wait``)
    job_stop_resume.py  jobs stop | resume: a last-state upgrade from the command line
"""

from recovery.cli.jobs import job_logs, job_stop_resume, job_wait
from recovery.cli.jobs.job_commands import jobs

__all__ = ["job_logs", "job_stop_resume", "job_wait", "jobs"]
