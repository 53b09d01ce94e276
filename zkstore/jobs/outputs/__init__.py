"""A job's outputs, committed exactly once with its checkpoints (invariant 18).

::

    R/jobs/<job>/outputs/<name>            JSON Output {name, uri, artifact, created, protocol}
    R/jobs/<job>/outputs/<name>/<%019d>    JSON OutputCommit {output, commit, attempt, parts,
                                           committed, protocol}: the parts one checkpoint
                                           committed (the node's name is the checkpoint's id)
    <uri>/attempt-<n>/...                  the attempt's staging: where its parts are written
    <uri>/_manifests/<%019d>.json          the manifest as of that commit, for plain readers

A job stages a step's parts under its attempt's place and names them in ``ctx.checkpoint(state,
commit={name: [parts]})``: the commit's node is created in the checkpoint's own transaction,
fenced on the attempt, so a step's parts are committed exactly when its checkpoint is, and a
fenced attempt commits nothing. No data is copied or renamed: a commit names where the parts
are. What was staged and never committed is deleted with the attempt's other artifacts.

The modules::

    output_records.py  the two records (parsed strictly, bounded: a commit's node stays under 64 KB)
    manifest.py        the manifest (what a reader sees) and the file written next to the data;
                       ``read_paths(uri)`` reads it without zkstore's runtime
    output_store.py    :class:`OutputStore`: declare, the commit's ops, read, sweep, remove
"""
