"""``zkstore schedules``: every verb of the noun (imported together).

::

    schedule_commands.py  the ``schedules`` group; list | show | update | pause | resume | delete
    schedule_create.py    schedules create (the job options of submit)
"""

from recovery.cli.schedules import schedule_create
from recovery.cli.schedules.schedule_commands import schedules

__all__ = ["schedule_create", "schedules"]
