"""Where notifications may go (zkstore.lifecycle.destinations) and how many a job may have
waiting (zkstore.lifecycle.outboxcap). Pure: names are resolved by a table given to the check,
not by DNS."""

from __future__ import annotations

import socket
from collections.abc import Sequence
from typing import Any

import pytest

from zkstore.errors import ConfigError, RefusedDestination
from zkstore.lifecycle.destinations import Destinations, destination_of
from zkstore.lifecycle.outbox import ATTEMPT_FAILED, QUARANTINED, SUCCEEDED
from zkstore.lifecycle.outboxcap import OutboxCounts

pytestmark = pytest.mark.unit

GLOBAL = Destinations()


@pytest.mark.parametrize(
    "address,kind",
    [
        ("127.0.0.1", "loopback"),
        ("127.9.9.9", "loopback"),
        ("::1", "loopback"),
        ("169.254.169.254", "link-local"),
        ("fe80::1", "link-local"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("fd00::1", "private"),
        ("224.0.0.251", "multicast"),
        ("ff02::1", "multicast"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("100.64.0.1", "non-global"),
        ("240.0.0.1", "private"),
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:169.254.169.254", "link-local"),
        ("93.184.215.14", None),
        ("2606:4700::1111", None),
    ],
)
def test_only_global_addresses_are_destinations(address: str, kind: str | None) -> None:
    assert GLOBAL.refusal(address) == kind


def test_the_operator_allows_names_addresses_and_blocks() -> None:
    allowed = Destinations.parse(["127.0.0.1, hooks.internal.example", "10.20.0.0/16", "::1"])
    assert allowed.refusal("127.0.0.1") is None
    assert allowed.refusal("::ffff:127.0.0.1") is None  # the same address, written in IPv6
    assert allowed.refusal("10.20.3.4") is None
    assert allowed.refusal("10.21.3.4") == "private"
    assert allowed.refusal("127.0.0.2") == "loopback"
    assert allowed.name_allowed("Hooks.Internal.Example.")
    assert not allowed.name_allowed("internal.example")
    assert (
        Destinations.from_env({"ZKSTORE_NOTIFY_ALLOWED_HOSTS": "127.0.0.1"}).refusal("127.0.0.1")
        is None
    )
    with pytest.raises(ConfigError, match="not a host name, an address or a CIDR block"):
        Destinations.parse("http://x/")


def table(answers: dict[str, list[str]]) -> Any:
    """A resolver answering from ``answers`` (getaddrinfo's shape)."""

    def resolve(host: str, port: int) -> Sequence[tuple[Any, ...]]:
        if host not in answers:
            raise socket.gaierror(socket.EAI_NONAME, "unknown")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in answers[host]]

    return resolve


def test_a_url_is_refused_by_its_address_or_the_addresses_its_name_resolves_to() -> None:
    resolve = table({"metadata.internal": ["169.254.169.254"], "hooks.example": ["93.184.215.14"]})
    with pytest.raises(RefusedDestination, match=r"169\.254\.169\.254 is a link-local address"):
        GLOBAL.check_url("http://169.254.169.254/latest/meta-data/", resolve)
    with pytest.raises(RefusedDestination) as refused:
        GLOBAL.check_url("http://metadata.internal:8080/hook/SECRET", resolve)
    message = str(refused.value)
    assert "metadata.internal (169.254.169.254) is a link-local address" in message
    assert "SECRET" not in message  # the URL's path is shown redacted
    assert "ZKSTORE_NOTIFY_ALLOWED_HOSTS" in message
    GLOBAL.check_url("https://hooks.example/h", resolve)
    GLOBAL.check_url("https://does-not-resolve.example/h", resolve)  # the sender decides
    Destinations.parse("metadata.internal").check_url("http://metadata.internal/", resolve)


def test_receivers_are_told_apart_by_host_and_port() -> None:
    assert destination_of("https://Hooks.Example/a") == "hooks.example:443"
    assert destination_of("http://hooks.example/b") == "hooks.example:80"
    assert destination_of("http://[::1]:8080/c") == "::1:8080"


def test_a_job_has_at_most_its_bound_of_entries_and_its_outcome_always_one() -> None:
    counts = OutboxCounts(per_job=3, total=100)
    assert [counts.admit("flood", ATTEMPT_FAILED, 1) for _ in range(5)] == [True] * 3 + [False] * 2
    assert counts.admit("flood", QUARANTINED, 1) is False
    assert counts.admit("flood", SUCCEEDED, 1) is True  # its outcome, past the bound
    assert counts.admit("quiet", ATTEMPT_FAILED, 2) is True  # other jobs are not touched
    assert counts.refused == {"job": 3}
    assert counts.waiting("flood") == 4


def test_the_listing_replaces_what_was_counted_before_it() -> None:
    counts = OutboxCounts(per_job=2, total=100)
    assert counts.admit("a", ATTEMPT_FAILED, 2)
    assert not counts.admit("a", ATTEMPT_FAILED, 1)
    counts.listed(["a~1~ATTEMPT_FAILED~x"], began=float("inf"))  # one delivered meanwhile
    assert counts.admit("a", ATTEMPT_FAILED, 1)
    assert not counts.admit("a", ATTEMPT_FAILED, 1)


def test_a_full_outbox_refuses_new_events_and_evicts_none() -> None:
    counts = OutboxCounts(per_job=50, total=4)
    counts.listed([f"j{n}~1~ATTEMPT_FAILED~x" for n in range(4)], began=0.0)
    assert not counts.admit("new", ATTEMPT_FAILED, 1)
    assert counts.admit("new", SUCCEEDED, 1)
    assert counts.refused == {"outbox": 1}
