"""Unit tests run pure code: a child process started from one is a failure (it belongs in
``integration/`` or ``e2e/``)."""

from __future__ import annotations

import os
import subprocess
from typing import Any

import pytest


@pytest.fixture(autouse=True)
def no_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a unit test started a process: move it to integration/ or e2e/")

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)
    monkeypatch.setattr(os, "fork", refuse)
    monkeypatch.setattr(os, "posix_spawn", refuse)
