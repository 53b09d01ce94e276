"""Idempotent submission: a retried submit returns the job it made the first time.

Submitting a job id that exists is compared with what is stored there (its live handle, or the
copy of its summary in its result or quarantine entry): the same definition and options return
the existing job (exit 0, the id printed; the client can retry a submit blindly), a different
one is a :class:`~zkstore.errors.HandleExists` (exit 5) naming the difference.

The comparison reads no payload: a definition's handle carries its :func:`fingerprint`, two
digests beside the summary fields that are compared as they are (``name``, ``kind``,
``entry``, ``max_attempts``, ``max_lost``, ``require``, ``files``, ``after``):

- ``code``: what runs. A script's source and arguments; a function's name, the source of its
  module file and its arguments; the shipped files (name, role and sha256 of each). Not the
  pickled function: cloudpickle's bytes differ from one process to the next for the same code
  (dynamic classes get a fresh id, sets iterate in a per-process order: measured, four
  processes, four digests), so the client gives the module's source (phase B: the file it
  loaded the function from). Without it the pickled code stands in, and a retry from another
  process is refused as different: never taken for the same when it may not be.
- ``options``: how it runs: the Spark configuration and every run option above.

``submit --idempotency-key KEY`` gives generated ids the same guarantee: the id is
``<stem>-<16 hex of sha256("zkstore-idempotency-key" NUL KEY)>`` (:func:`idempotent_job_id`),
the same for every retry with the key, where a generated id is ``<stem>-<8 random hex>``. The
key is scoped to the stem (the file, or file and function): the same key with another file makes
another job. Nothing else is stored: the job id *is* the record of the key, for as long as the
job or its result is kept (``--keep-results``).
"""

from __future__ import annotations

import hashlib
import json
import pickle
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from zkstore.errors import ConfigError, HandleExists
from zkstore.jobs.definition import SCRIPT, JobDefinition
from zkstore.jobs.dependencies import format_after
from zkstore.jobs.runoptions import LifecycleOptions
from zkstore.jobs.runspec import RUN, RunSpec
from zkstore.records.handle import SummaryValue
from zkstore.records.strict import check_text

__all__ = [
    "CODE",
    "COMPARED",
    "MAX_KEY_CHARS",
    "OPTIONS",
    "PROGRAM",
    "check_key",
    "check_resubmission",
    "clean_stem",
    "differences",
    "fingerprint",
    "idempotent_job_id",
]

CODE, OPTIONS = "code", "options"
#: the digest of the code without its arguments (a submission's summary since 0.3; an older
#: one has none): tells "only the arguments differ" from "the code differs"
PROGRAM = "program"
#: Summary fields compared as they are, in the order differences are named.
COMPARED = (
    "name",
    "kind",
    "entry",
    "max_attempts",
    "max_lost",
    "require",
    "pool",
    "run",
    "files",
    "after",
)
MAX_KEY_CHARS = 200
_KEY_LABEL = b"zkstore-idempotency-key\0"


def _digest(value: object) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def fingerprint(
    definition: JobDefinition,
    *,
    source: str | None = None,
    args: Sequence[Any] | None = None,
    after: str | None = None,
) -> dict[str, SummaryValue]:
    """The summary fields that make ``definition`` comparable: ``code`` and ``options``.

    For a function job, ``source`` is the text of its module's file and ``args`` its
    arguments (pickled for the digest: plain values pickle the same in every process); without
    them the pickled function stands in (see the module). ``after`` is the summary's
    dependencies field, if any.
    """
    files = sorted([f.name, f.role, hashlib.sha256(f.data).hexdigest()] for f in definition.files)
    program: str | None = None
    base = {"kind": definition.kind, "function": definition.function_name, "files": files}
    if definition.kind == SCRIPT:
        what: dict[str, Any] = {"source": definition.source, "args": list(definition.args)}
        program = _digest({**base, "source": definition.source})
    elif source is not None:
        pickled = pickle.dumps(tuple(args or ()), protocol=4)
        what = {"module": source, "args": hashlib.sha256(pickled).hexdigest()}
        program = _digest({**base, "module": source})
    else:
        pickled = (definition.code or b"") + (definition.arguments or b"")
        what = {"pickled": hashlib.sha256(pickled).hexdigest()}
    code = _digest({**base, **what})
    options = _digest(
        {
            "name": definition.name,
            "spark_conf": sorted(definition.spark_conf.items()),
            "max_attempts": definition.max_attempts,
            "max_lost_attempts": definition.max_lost_attempts,
            "require": sorted(definition.require.items()),
            "after": after or "",
        }
    )
    found: dict[str, SummaryValue] = {CODE: code, OPTIONS: options}
    if program is not None:
        found[PROGRAM] = program
    return found


def differences(
    existing: Mapping[str, SummaryValue],
    new: Mapping[str, SummaryValue],
    *,
    also: Sequence[str] = (),
) -> list[str]:
    """How the submission whose summary is ``new`` differs from the job stored with
    ``existing`` (empty: the same submission). Each item is one sentence for people. ``also``:
    more summary keys that change how the job runs (the lifecycle's: ``--timeout``,
    ``--notify``, the retry pacing), compared as they are stored."""
    if CODE not in existing or OPTIONS not in existing:
        return ["the existing job carries no fingerprint (an older zkstore submitted it)"]
    existing, new = _compared(existing), _compared(new)
    found = [
        f"{key}: {_shown(existing.get(key))} there, {_shown(new.get(key))} here"
        for key in (*COMPARED, *sorted(also))
        if existing.get(key) != new.get(key)
    ]
    if existing[CODE] != new.get(CODE):
        if PROGRAM in existing and PROGRAM in new:
            found.append(
                "the code differs (its source or its shipped files)"
                if existing[PROGRAM] != new[PROGRAM]
                else "only the arguments differ (after --)"
            )
        else:
            found.append("the code differs (its source, its arguments or its shipped files)")
    if existing[OPTIONS] != new.get(OPTIONS) and not found:
        found.append("the Spark configuration (--conf) differs")
    return found


def _compared(summary: Mapping[str, SummaryValue]) -> dict[str, SummaryValue]:
    """``summary`` as :func:`differences` compares it: its run options (the ``run`` field of
    fleet protocol 4, or the flat keys before it) as the flat keys people name (``timeout``,
    ``require``, ``pool``, ``after``), so that a difference says which option whichever form
    each side holds; a garbled field is compared as it is stored. The Spark settings are the
    fingerprint's (:data:`OPTIONS`)."""
    try:
        run = RunSpec.from_summary(summary)
    except ValueError:
        return dict(summary)
    found: dict[str, SummaryValue] = dict(summary)
    found.update(run.lifecycle.given())
    found.update(require=run.require_shown(), pool=run.pool, after=format_after(run.after) or None)
    # what is left of them (an option named nowhere above), compared as stored
    found[RUN] = replace(
        run, require=(), spark=(), more=0, pool=None, lifecycle=LifecycleOptions(), after=()
    ).to_json()
    return found


def _shown(value: SummaryValue) -> str:
    """A summary value for people: a missing one is the option not given, whose default
    applies (Python's ``None`` said nothing of that)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))  # seconds, as the options were given: 600, not 600.0
    return "not given (the default)" if value is None else repr(value)


def check_resubmission(
    job_id: str, existing: Mapping[str, SummaryValue], new: Mapping[str, SummaryValue]
) -> None:
    """Return if submitting ``new`` again as ``job_id`` is the same submission as the job
    stored with ``existing`` (the caller returns that job); raise :class:`HandleExists`
    (exit 5) naming the differences if not."""
    found = differences(existing, new)
    if found:
        raise HandleExists(
            f"job {job_id} exists with another definition ({'; '.join(found)}): choose another "
            "--job-id, or cancel that job first"
        )


def check_key(key: str) -> str:
    """``key`` if it can be an idempotency key: 1-200 characters, no control characters."""
    if not isinstance(key, str) or not 0 < len(key) <= MAX_KEY_CHARS:
        raise ConfigError(f"an idempotency key is 1-{MAX_KEY_CHARS} characters")
    try:
        return check_text(key, "the idempotency key")
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def clean_stem(stem: str) -> str:
    """``stem`` as the head of a job id, as generated ids have it (``default_job_id``)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-._")[:100] or "job"


def idempotent_job_id(stem: str, key: str) -> str:
    """The job id of ``submit --idempotency-key KEY`` for a job whose generated id would be
    ``<stem>-<random>``: the same for every retry with ``key``."""
    digest = hashlib.sha256(_KEY_LABEL + check_key(key).encode()).hexdigest()[:16]
    return f"{clean_stem(stem)}-{digest}"
