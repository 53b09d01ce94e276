"""The submit side: the HA submit wrapper (Python API) and what a job takes along.

::

    api.py                 :class:`Client` and :func:`submit`: submit, wait, cancel, status
    jobfile.py             a job's target: a script or ``module:function``
    spark_dependencies.py  the job's files, modules and Spark packages, checked and prepared
    modules.py             the user's own modules, zipped
"""
