"""The Spark driver JVMs of a daemon's drivers, made cheap to start (issue 47).

A PySpark driver's first Spark action waits for its JVM: loading and verifying ten thousand
classes from the jars, then JIT-compiling the paths a context and a query take. Two remedies,
each a module here:

- :mod:`.archive`: a class-data-sharing archive of the classes a Spark driver loads, made by the
  daemon in the background once per pyspark version, Java and class path; every driver it
  launches maps it (a JVM whose class path differs loads the classes from the jars, and says
  why).
- :mod:`.pool`: ``--warm-drivers N`` driver JVMs started ahead of need and warmed by a
  throw-away context and query (:mod:`.warmup`); an attempt takes one when its job first asks
  for Spark (:mod:`.asks`; at its launch with ``--driver-user``) and its driver connects to it
  instead of starting one, if its JVM-level settings match
  (:mod:`recovery.shared.jvm_settings`); each serves one attempt and is discarded after it.

Each module::

    archive.py           the class-data archive: made, verified before any use, removed
    class_data.py        a daemon's Spark setup: the archive verified or made in the background
    pool.py              ``--warm-drivers``: JVMs started, warmed, handed to one attempt, ended
    asks.py              each attempt's channel to its daemon, to take a warm JVM at first use, once
    warmup.py            the throw-away context and queries that warm a JVM (its own child process)
    home.py              where Spark and Java are, and the command Spark's launcher builds
    confdir.py           a deployment's ``SPARK_CONF_DIR`` without defeating the archive
    warm_jvm_records.py  a warm JVM's record on disk, by which a restarted daemon finds it
"""
