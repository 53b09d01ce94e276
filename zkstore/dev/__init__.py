"""The store's development servers and tools: only dev code imports them (an import-linter
contract says so); ``zkstore zookeeper`` is a dev command, loaded by name. The ensemble and
the blackout proxies are in :mod:`zkstore_dev`.

::

    embedded.py    an embedded ZooKeeper server, from the pyspark wheel's jars: for
                   development, the demo and the tests
    commands.py    the dev commands of the store: ``zkstore zookeeper``
"""
