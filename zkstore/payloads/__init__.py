"""Payloads in object storage, and the stores that keep their verified handles in
ZooKeeper: the state handle store, its entries, storage, serializers, secrets, S3 clients
and the artifact roots. The top of the core's three parts: it uses
:mod:`zkstore.records` and :mod:`zkstore.zookeeper`, neither uses it. The modules::

    store.py        the state handle store: payloads in storage, verified handles in ZooKeeper
    entries.py      what the handle store hands out: live entries, broken ones, instance ids
    storage.py      payloads in object storage (fsspec): create-only writes, verified reads
    serializers.py  states to payload bytes and back: cloudpickle for code, JSON for data
    secrecy.py      secret files; a process made undumpable, its secrets out of its environment
    s3.py           what an S3 storage's client is made with, and what a process shares
    artifacts.py    the artifact roots: where job artifacts may live, and which place is whose
"""
