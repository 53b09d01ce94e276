"""The HA runtime of zkstore: leader election, the recovery daemon, job drivers, HA submission."""
