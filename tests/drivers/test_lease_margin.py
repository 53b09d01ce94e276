"""The lease's margin."""

from __future__ import annotations

import pytest

from recovery.driver.lease import default_margin

pytestmark = pytest.mark.unit


def test_margin_is_a_quarter_of_the_session() -> None:
    assert default_margin(10.0) == 2.5
    assert default_margin(4.0) == 1.0
