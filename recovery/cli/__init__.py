"""The runtime's commands, attached to the store's click group (:mod:`zkstore.cli`) by name.

::

    main.py     the ``zkstore`` console script: names the runtime's commands on the root group
    daemon.py   zkstore daemon
    submit.py   zkstore submit, zkstore jobs wait
    daemons.py  zkstore daemons list | drain | undrain
"""
