"""The ``zkstore`` console script: the store's commands plus the runtime's, on one click group."""

from __future__ import annotations

from zkstore.cli import cli


def main() -> None:
    cli(prog_name="zkstore")


if __name__ == "__main__":
    main()
