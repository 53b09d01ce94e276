"""Option types of the command line (light: importing them loads click only)."""

from __future__ import annotations

import re
from typing import Any

import click

__all__ = ["Duration", "Retention"]

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class Duration(click.ParamType):  # type: ignore[type-arg]
    """``90s``, ``10m``, ``2h``, ``1d`` or plain seconds; with ``bounds`` (the fewest and most
    seconds), within them."""

    name = "duration"

    def __init__(self, bounds: tuple[float, float] | None = None) -> None:
        self.bounds = bounds

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        if isinstance(value, int | float):
            seconds = float(value)
        else:
            match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", str(value))
            if not match:
                self.fail(f"{value!r} is not a duration like 30s, 10m, 2h", param, ctx)
            seconds = float(match.group(1)) * _UNITS[match.group(2) or "s"]
        if self.bounds is not None and not self.bounds[0] <= seconds <= self.bounds[1]:
            low, high = self.bounds
            self.fail(f"{value} is not between {low:g} s and {high:g} s", param, ctx)
        return seconds


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
