"""An operator's view of a whole cluster: what is in it, who may touch it, what lingers.

::

    inventory.py   everything under a cluster's root in a few rounds of pipelined reads, and
                   verify (payloads read, never unpickled)
    acl.py         who may touch the cluster's nodes: find ACLs open to anyone, put ours on all
    lingering/     what failures leave behind, one class per kind: found exactly, cleaned safely
"""
