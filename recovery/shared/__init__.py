"""What more than one of the runtime's processes needs, below all of them.

The leader, the member, the driver and the client are read and changed alone (an import-linter
contract says none imports another); what two of them share lives here:

- ``attemptdir``: an attempt's working directory and the names in it (member writes, driver reads).
- ``fleet``: the daemons, their labels and assignments as read from ZooKeeper (leader, page, CLI).
- ``pickling``: which modules cloudpickle ships by value (client pickles, driver checks).
- ``processes``: process identity (start times, command lines) for adoption and signalling.
- ``sparkconf``: Spark configuration keys and the driver's ``spark-submit`` arguments.
"""
