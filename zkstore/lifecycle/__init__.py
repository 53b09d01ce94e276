"""The run's lifecycle beyond "restart what dies": pacing, limits, stop and resume, notifications.

The family, bottom up (each module pure unless it says otherwise)::

    lifecycle_states.py
                     the words this family adds: STOPPED, TIMED_OUT, STUCK and the event names
    retry_backoff.py
                     retry pacing: exponential backoff with jitter, apart for failed and lost
                     attempts, reset after a stable run; when the next attempt is due
    attempt_limits.py
                     --timeout, --start-timeout, --progress-timeout: is an attempt over its
                     limits, and when to look again; how often a driver may write a heartbeat
    options.py       a job's lifecycle options (the two above and --notify) in its handle summary
    lifecycle_records.py
                     the records: stop request, end request, heartbeat, notification entry
    stopping.py      the leader's decision for a job that is asked to stop, stopping, or stopped
    lifecycle_ops.py
                     the ops the leader (end, stopped) and the driver (heartbeat) add to their
                     transactions
    stopstore.py     (ZooKeeper) ``jobs stop`` and ``jobs resume``: the client's writes
    redefine.py      (ZooKeeper + storage) replacing a stopped job's definition
    destinations.py  (resolves names) where notifications may go: global addresses, and what
                     the operator allows besides
    outbox.py        (ZooKeeper) notification events, their idempotency key, the op builder the
                     leader adds to its transactions, and the outbox the sender drains
    outboxcap.py     (the leader's counts) the outbox's bounds: per job and in all

The runtime side (the member's two-step ending of a driver, the driver's heartbeat gate, the
notification sender) lives with the roles that run it: :mod:`recovery.member.ending`,
:mod:`recovery.driver.heartbeat`, :mod:`recovery.leader.notifier`.
"""
