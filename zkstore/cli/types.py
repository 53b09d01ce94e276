"""Option types of the command line (light: importing them loads click only)."""

from __future__ import annotations

import re
from typing import Any

import click

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class Duration(click.ParamType):  # type: ignore[type-arg]
    """``90s``, ``10m``, ``2h``, ``1d`` or plain seconds."""

    name = "duration"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        if isinstance(value, int | float):
            return float(value)
        match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", str(value))
        if not match:
            self.fail(f"{value!r} is not a duration like 30s, 10m, 2h", param, ctx)
        return float(match.group(1)) * _UNITS[match.group(2) or "s"]


class Retention(Duration):
    """A :class:`Duration` (greater than zero), or ``forever`` (None)."""

    name = "retention"

    def convert(  # type: ignore[override]
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float | None:
        if value is None or str(value).strip().lower() == "forever":
            return None
        seconds = super().convert(value, param, ctx)
        if seconds <= 0:
            self.fail("a retention must be longer than zero (or: forever)", param, ctx)
        return seconds
