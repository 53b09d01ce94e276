"""The state of a job's control as people and scripts see it: desired against applied, per key.

A key is ``applied`` (the value in effect is the desired one), ``pending`` (no attempt has
acknowledged it yet: the live one is about to, or the next one will), ``rejected`` (the job
refused this value, with a reason; it runs on with the value it had) or ``needs-restart`` (the
job takes it at its next attempt). What the view reads is read at about the same moment, not
atomically: a change made meanwhile shows as pending.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from zkstore.errors import CorruptRecord, HandleNotFound
from zkstore.jobs.checkpoints import CheckpointStore
from zkstore.jobs.control.control_records import APPLIED, NEEDS_RESTART, REJECTED, ControlAck
from zkstore.jobs.control.control_store import ControlStore, Declared, Desired
from zkstore.jobs.control.values import CHECKPOINT, LOG_LEVEL, PAUSE, is_builtin, same_value
from zkstore.records.handle import Handle
from zkstore.records.job_records import RunningInfo
from zkstore.records.job_states import KeyState

__all__ = [
    "CONTROL_REQUEST_FIELD",
    "CONTROL_VERSION_FIELD",
    "KEY_PENDING",
    "ControlView",
    "KeyView",
    "key_views",
    "read_view",
    "value_text",
]

KEY_PENDING = KeyState.PENDING

#: Summary fields of a checkpoint's handle: the control version in effect when it was taken,
#: and the checkpoint request (a token) it answered.
CONTROL_VERSION_FIELD = "control_version"
CONTROL_REQUEST_FIELD = "control_checkpoint"


@dataclass(frozen=True)
class KeyView:
    key: str
    state: str
    desired: Any = None
    effective: Any = None
    in_desired: bool = True
    in_effect: bool = False
    reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        found: dict[str, Any] = {"key": self.key, "state": self.state, "reason": self.reason}
        if self.in_desired:
            found["desired"] = self.desired
        if self.in_effect:
            found["effective"] = self.effective
        return found


@dataclass(frozen=True)
class ControlView:
    """Everything ``zkstore control get`` shows."""

    job_id: str
    desired: Desired
    ack: ControlAck | None
    declared: Declared
    running_attempt: int | None
    checkpoint: Handle | None
    keys: list[KeyView] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def live(self) -> bool:
        """The acknowledgement is the live attempt's."""
        return self.ack is not None and self.ack.attempt == self.running_attempt

    @property
    def paused(self) -> bool:
        return self.live and self.ack is not None and self.ack.paused

    def by_state(self, state: str) -> list[KeyView]:
        return [k for k in self.keys if k.state == state]

    def checkpoint_request(self) -> dict[str, Any] | None:
        token = self.desired.values.get(CHECKPOINT)
        if not isinstance(token, str):
            return None
        # Every checkpoint records the request in effect: the newest one carrying this token was
        # taken after the job saw the request (the first such one answered it).
        summary = self.checkpoint.summary if self.checkpoint is not None else {}
        return {"token": token, "answered": summary.get(CONTROL_REQUEST_FIELD) == token}

    def as_dict(self) -> dict[str, Any]:
        ack = self.ack
        applied = None
        if ack is not None:
            applied = {
                "version": ack.applied_version,
                "attempt": ack.attempt,
                "updated": ack.updated,
                "live": self.live,
                "values": ack.values,
            }
        checkpoint = None
        if self.checkpoint is not None:
            summary = self.checkpoint.summary
            checkpoint = {
                "id": summary.get("checkpoint_id"),
                "control_version": summary.get(CONTROL_VERSION_FIELD),
            }
        declared = self.declared.keys
        return {
            "job_id": self.job_id,
            "version": self.desired.version,
            "values": self.desired.values,
            "applied": applied,
            "keys": [k.as_dict() for k in self.keys],
            "pending": [k.key for k in self.by_state(KEY_PENDING)],
            "rejected": {k.key: k.reason for k in self.by_state(REJECTED)},
            "needs_restart": [k.key for k in self.by_state(NEEDS_RESTART)],
            "pause_requested": self.desired.values.get(PAUSE) is True,
            "paused": self.paused,
            "paused_since": ack.paused_since if ack is not None and self.paused else None,
            "log_level": self.desired.values.get(LOG_LEVEL),
            "checkpoint_request": self.checkpoint_request(),
            "checkpoint": checkpoint,
            "declared": None
            if declared is None
            else {key: spec.as_dict() for key, spec in sorted(declared.items())},
            "record_errors": self.errors or None,
        }


def key_views(desired: Desired, ack: ControlAck | None) -> list[KeyView]:
    """The state of every key that is desired or in effect, sorted (built-ins last)."""
    effective = ack.values if ack is not None else {}
    decisions = ack.decisions() if ack is not None else {}
    views = []
    for key in sorted(desired.values.keys() | effective.keys(), key=lambda k: (is_builtin(k), k)):
        in_desired, in_effect = key in desired.values, key in effective
        wanted, have = desired.values.get(key), effective.get(key)
        decision = decisions.get(key)
        reason = None
        if (
            decision is not None
            and decision.state in (REJECTED, NEEDS_RESTART)
            and in_desired
            and same_value(decision.value, wanted)
        ):
            state, reason = decision.state, decision.reason
        elif ack is not None and in_desired == in_effect and same_value(wanted, have):
            state = APPLIED
        else:
            state = KEY_PENDING
        views.append(KeyView(key, state, wanted, have, in_desired, in_effect, reason))
    return views


def read_view(store: ControlStore, checkpoints: CheckpointStore) -> ControlView:
    """Read desired, acknowledgement, declaration, the live attempt and the newest checkpoint's
    summary; unreadable records are reported in ``errors``, never raised (an unreadable desired
    object shows as empty, with its error: the rest is still worth seeing)."""
    errors: dict[str, str] = {}
    try:
        desired = store.desired()
    except CorruptRecord as exc:
        desired, errors["control"] = Desired({}, None), str(exc)
    try:
        ack = store.acknowledgement()
    except CorruptRecord as exc:
        ack, errors["control-ack"] = None, str(exc)
    declared = store.declared()
    if declared.error is not None:
        errors["control-keys"] = declared.error
    running = store.layout.running(store.job_id)
    attempt = None
    try:
        attempt = RunningInfo.from_znode(*store.zk.get(running), running).attempt
    except HandleNotFound:
        pass
    except CorruptRecord as exc:
        errors["running"] = str(exc)
    checkpoint = checkpoints.newest_handle()
    return ControlView(
        store.job_id,
        desired,
        ack,
        declared,
        attempt,
        checkpoint,
        key_views(desired, ack),
        errors,
    )


def value_text(value: Any) -> str:
    """A control value for a table: JSON, so that ``20`` and ``"20"`` look different."""
    return json.dumps(value)
