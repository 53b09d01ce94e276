"""The run's lifecycle beyond "restart what dies": pacing, limits, stop and resume, notifications.

The family, bottom up (each module pure unless it says otherwise)::

    states        the words this family adds: STOPPED, TIMED_OUT, STUCK and the event names
    policy        retry pacing: exponential backoff with jitter, apart for failed and lost
                  attempts, reset after a stable run; when the next attempt is due
    limits        --timeout, --start-timeout, --progress-timeout: is an attempt over its limits,
                  and when to look again; how often a driver may write a heartbeat
    options       a job's lifecycle options (the two above and --notify) in its handle summary
    records       the records: stop request, end request, heartbeat, notification entry
    stopping      the leader's decision for a job that is asked to stop, stopping, or stopped
    stopstore     (ZooKeeper) ``jobs stop`` and ``jobs resume``: the client's writes
    redefine      (ZooKeeper + storage) replacing a stopped job's definition
    outbox        (ZooKeeper) notification events, their idempotency key, the op builder the
                  leader adds to its transactions, and the outbox the sender drains

The runtime side (the member's two-step ending of a driver, the driver's heartbeat gate, the
notification sender) lives with the roles that run it: :mod:`recovery.member.ending`,
:mod:`recovery.driver.heartbeat`, :mod:`recovery.leader.notifier`.
"""
