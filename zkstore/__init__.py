"""zkstore: a high-availability job store for PySpark pipelines.

Payloads (cloudpickled job definitions, checkpoint metadata) live in object storage through fsspec;
ZooKeeper holds small JSON handles pointing at them, with version checks on every update.
"""

__version__ = "0.3.0.dev0"
