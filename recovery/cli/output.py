"""One output function for every listing: an aligned table for people, JSON for scripts."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import click

from zkstore.records.strict import escape_control

__all__ = ["FORMATS", "emit", "format_option", "render_table"]

FORMATS = ("table", "json")


def format_option(func: Any) -> Any:
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(FORMATS),
        default="table",
        show_default=True,
        help="table for people, json for scripts (the JSON shape is stable).",
    )(func)


def _cell(value: Any) -> str:
    """One table cell: one line, whatever the value holds (a planted name with a newline must
    not forge a row, nor an escape sequence repaint the terminal)."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.1f}"
    if isinstance(value, list | tuple):
        return ",".join(_cell(v) for v in value) or "-"
    return escape_control(str(value))


def render_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> str:
    """Rows as aligned columns with an upper-case header; ``-`` for missing values."""
    cells = [[c.upper() for c in columns]] + [[_cell(r.get(c)) for c in columns] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in cells
    )


def emit(
    data: Any,
    fmt: str,
    *,
    columns: Sequence[str] | None = None,
    rows: Sequence[Mapping[str, Any]] | None = None,
    empty: str = "nothing found",
) -> None:
    """Print ``data`` as JSON, or ``rows`` (default: ``data``) as a table of ``columns``."""
    if fmt == "json":
        click.echo(json.dumps(data, indent=2, sort_keys=True, default=str))
        return
    table_rows = data if rows is None else rows
    if columns is None:
        assert isinstance(table_rows, Mapping)
        for key, value in table_rows.items():
            click.echo(f"{key}: {_cell(value)}")
        return
    if not table_rows:
        click.echo(empty)
        return
    click.echo(render_table(table_rows, columns))
