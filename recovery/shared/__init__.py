"""What more than one of the runtime's processes needs, below all of them.

The leader, the member, the driver and the client are read and changed alone (an import-linter
contract says none imports another); what two of them share lives here::

    attemptdir.py     an attempt's working directory and Spark's scratch beside it, removed
                      together (the member makes the directory, the driver works in it)
    fleet_view.py     the daemons, their labels and assignments as read from ZooKeeper (leader,
                      page, CLI)
    fleet_daemons.py  the daemons as operators see them, one JSON for the CLI and the HTTP
                      API, and their drain marks set and lifted (CLI; the HTTP API can share it)
    memory.py         a daemon's own memory (resident set, Python heap) for its metrics and its
                      member record
    pickling.py       which modules cloudpickle ships by value (client pickles, driver checks)
    processes.py      process identity (pid, start time, boot; pidfds) for adoption and signalling
    sparkconf.py      Spark configuration as spark-submit takes it, and its list-valued keys
    jvm_settings.py   the Spark settings fixed at a driver JVM's launch (pure), and the offer of
                      a warm JVM a member hands its driver
"""
