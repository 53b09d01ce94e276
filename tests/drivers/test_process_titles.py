"""Process titles naming the role and the job (issue 27: every driver showed in ``ps`` as
``python -m recovery.forkserver``): what each role's title says, and how a title is fitted into
the room a process has without touching its environment."""

from __future__ import annotations

import pytest

from recovery.proctitle import (
    COMM_BYTES,
    MAX_TITLE,
    comm_name,
    daemon_title,
    driver_title,
    fit,
    fork_server_title,
    shipper_title,
)

pytestmark = pytest.mark.unit


def test_each_role_names_itself_and_its_job() -> None:
    assert fit(driver_title("etl-daily", 3)) == "zkstore driver etl-daily attempt 3"
    assert fit(daemon_title("host-a")) == "zkstore daemon host-a"
    assert fit(shipper_title("host-a")) == "zkstore log-shipper host-a"
    assert fit(fork_server_title("host-a")) == "zkstore fork-server host-a"


def test_a_long_job_id_is_cut_in_the_middle_keeping_role_and_attempt() -> None:
    job = "nightly-import-of-the-customer-table-2026-11-23T00:00:00Z-run-000123"
    title = fit(driver_title(job, 12), 58)  # the room of `<venv python> -m recovery.forkserver`
    assert len(title) == 58
    assert title.startswith("zkstore driver nightly-import")
    assert title.endswith("run-000123 attempt 12")
    assert "~" in title


def test_no_room_at_all_still_gives_a_prefix_and_never_more_than_the_room() -> None:
    assert fit(driver_title("job", 1), 10) == "zkstore dr"
    assert fit(driver_title("job", 1), 0) == ""
    assert len(fit(driver_title("x" * 1000, 1))) == MAX_TITLE


def test_control_characters_never_reach_a_title() -> None:
    title = fit(daemon_title("host\nfake-line\x1b[31m"))
    assert "\n" not in title and "\x1b" not in title
    assert title == "zkstore daemon host?fake-line?[31m"


def test_the_kernel_name_fits_its_fifteen_bytes() -> None:
    assert comm_name(driver_title("j", 1)) == "zk-driver"
    assert comm_name(shipper_title("d1")) == "zk-log-shipper"
    assert all(
        len(comm_name(t).encode()) <= COMM_BYTES
        for t in (driver_title("j", 1), daemon_title("d"), fork_server_title("d"))
    )
