"""The runtime's commands, attached to the store's click group (:mod:`zkstore.cli`).

::

    main.py     the ``zkstore`` console script: daemon and submit, the store's commands
    daemons.py  zkstore daemons list | drain | undrain
"""
