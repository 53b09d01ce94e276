"""The job of the pools' tests, as a user's file: it notes that it started, then runs until the
test lets it go."""

#: each job notes that it started (a line in ``log``), then runs until ``gate`` exists
JOB = """\
import os
import time


def run(ctx, name, log, gate):
    with open(log, "a") as out:
        out.write(name + "\\n")
    while not os.path.exists(gate):
        time.sleep(0.05)
"""
