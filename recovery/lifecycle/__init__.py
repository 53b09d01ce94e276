"""The runtime's side of the run's lifecycle (see :mod:`zkstore.lifecycle` for the store's):

ending      the member's two-step ending of a driver: SIGTERM, a grace period, SIGKILL of
            its process group, and "known dead" only once the whole group is gone (pure)
heartbeat   the driver's gate on heartbeat writes: ``ctx.heartbeat()`` is a local clock
            update; a write goes out at most once per interval (pure)
notifier    the notification sender: drains the outbox, POSTs with a deadline, deletes on a
            2xx in a fenced write, backs off; a thread of the leader
"""
