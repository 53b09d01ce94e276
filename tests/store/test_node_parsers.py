"""Every node kind of the ZooKeeper layout has one strict parser: any bytes in, a record or
:class:`CorruptRecord` out, never another exception (a property, 1,000 examples per kind).

Pure: no servers. A record a parser returns must also be usable: written back it parses to
itself (its writer and its reader agree), and its times compare with now (no time that
overflows when converted or moved). The nodes whose data nobody reads (presence only) are
listed too, so that the table covers the whole layout.
"""

from __future__ import annotations

import inspect
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, fields
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers import examples
from tests.node_kinds import NOW, PARENTS, PARSED, PRESENCE_ONLY
from zkstore.errors import CorruptRecord
from zkstore.layout import Layout
from zkstore.records.fleet_records import MemberInfo
from zkstore.records.handle import Handle
from zkstore.records.job_records import RunningInfo
from zkstore.records.record import Record
from zkstore.records.strict import parse_time

pytestmark = pytest.mark.unit

EXAMPLES = examples(1000)

PATH = "/zkstore/default/planted"


def test_the_table_covers_every_node_of_the_layout() -> None:
    named = {name for name, _ in inspect.getmembers(Layout) if not name.startswith("_")}
    covered = {method for method, _, _ in PARSED.values()} | set(PRESENCE_ONLY) | PARENTS
    assert named - {"root"} <= covered, named - covered


@pytest.mark.parametrize("kind", sorted(PARSED))
def test_what_each_writer_writes_parses(kind: str) -> None:
    _, parse, valid = PARSED[kind]
    usable(parse(valid, PATH), parse)


@pytest.mark.parametrize(
    "kind,field,token",
    [
        ("control", "rate", b"NaN"),
        ("control", "rate", b"-Infinity"),
        ("control", "rate", b"1e400"),
        ("control", "rate", b"1" * 30),
        ("running", "attempt", b"2147483648"),
        ("running", "host", b'"\\ud800"'),
        ("running", "started", b'"9999-12-31T23:59:59-23:59"'),
        ("running", "started", b'"0001-01-01T00:00:00+01:00"'),
    ],
)
def test_tokens_no_writer_makes_are_refused(kind: str, field: str, token: bytes) -> None:
    """Each of these passed the parser before: Python's JSON takes NaN, Infinity (1e400 too)
    and lone surrogates, which no strict JSON reader (a browser) takes back; a time in year 9999
    west of UTC, or in year 1 east of it, overflows when compared with now."""
    _, parse, valid = PARSED[kind]
    record = json.loads(valid)
    record[field] = "__raw__"
    with pytest.raises(CorruptRecord):
        parse(json.dumps(record).encode().replace(b'"__raw__"', token), PATH)


@dataclass(frozen=True)
class _Stamped(Record):
    """A record with a field wider than 32 bits (a time in milliseconds)."""

    pid: int = 0
    started_ms: int = 0

    wide = frozenset({"started_ms"})


def test_record_integers_fit_32_bits_unless_declared_wide() -> None:
    """A znode version past 32 bits breaks kazoo's connection when it is sent back, a pid past
    it makes ``os.kill`` raise: a record's integers are 32-bit unless its class says ``wide``."""
    parsed = _Stamped.from_znode(b'{"pid": 7, "started_ms": 1700000000000}', None, PATH)
    assert parsed.started_ms == 1700000000000
    with pytest.raises(CorruptRecord, match="'pid' is out of range"):
        _Stamped.from_znode(b'{"pid": 2147483648, "started_ms": 1}', None, PATH)
    with pytest.raises(CorruptRecord, match="over 64 bits"):
        _Stamped.from_znode(b'{"pid": 1, "started_ms": 9223372036854775808}', None, PATH)


def test_a_process_start_time_of_a_long_running_host_is_not_garbage() -> None:
    """A process's start time is counted in clock ticks since boot (100 a second): past 2**31
    after 248 days of uptime. A driver's running node and a daemon's member record that carry
    one must still read, or a host up that long would see every live driver as unreadable."""
    ticks = 300 * 86400 * 100  # started 300 days after boot
    running = RunningInfo(
        version=None,
        attempt=1,
        host="h",
        pid=42,
        started=parse_time("2026-11-23T00:00:00+00:00"),
        start_ticks=ticks,
        boot_id="b",
    )
    assert RunningInfo.from_znode(running.to_bytes(), None, PATH).start_ticks == ticks
    member = MemberInfo(
        version=None,
        daemon_id="d1",
        host="h",
        pid=42,
        slots=2,
        started=parse_time("2026-11-23T00:00:00+00:00"),
        start_ticks=ticks,
        boot_id="b",
    )
    assert MemberInfo.from_znode(member.to_bytes(), None, PATH).start_ticks == ticks


# -- the property -------------------------------------------------------------------------------

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.sampled_from([-1, 0, 2**31 - 1, 2**31, 2**63 - 1, 2**63, 10**400])
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
    | st.sampled_from(
        [
            "",
            "a\x00b",
            "x\ny",
            "\x1b[2J",
            "\ud800",
            "\U0001f600",
            "2026-01-01T00:00:00",
            "0001-01-01T00:00:00+01:00",
            "9999-12-31T23:59:59-23:59",
            "2026-02-30T00:00:00Z",
            NOW,
            "STARTING",
            "SUCCEEDED",
            "finished",
            "job",
            "x" * 3000,
        ]
    )
)
#: JSON values of one level (deeper ones come from the "nest" mutation and the deep inputs):
#: Hypothesis' recursive strategies cost twice as much per example.
JSONISH = (
    SCALARS
    | st.lists(SCALARS, max_size=3)
    | st.dictionaries(st.text(max_size=8), SCALARS, max_size=3)
)


#: JSON tokens beyond what a writer of valid values makes: constants Python's parser accepts,
#: numbers that overflow, a lone surrogate, an escaped control character.
RAW_TOKENS = [
    b"NaN",
    b"Infinity",
    b"-Infinity",
    b"1e400",
    b"-1e400",
    b"1" * 30,
    b"-" + b"9" * 20,
    b"1" * 5000,
    b'"\\ud800"',
    b'"\\u0000"',
    b"1.5",
    b"true",
    b"[[[[[]]]]]",
]


def encode(value: Any) -> bytes:
    """JSON as a careless or hostile writer makes it: NaN, Infinity and lone surrogates kept."""
    return json.dumps(value, allow_nan=True).encode("utf-8", errors="surrogatepass")


@st.composite
def mutated(draw: st.DrawFn, valid: bytes) -> bytes:
    """The writer's record with one field dropped, replaced or added, or two keys swapped."""
    record: dict[str, Any] = json.loads(valid)
    keys = sorted(record)
    how = draw(st.sampled_from(["replace", "replace", "drop", "add", "nest", "raw"]))
    if how == "raw" and keys:  # a token json.dumps never writes from a valid value
        record[draw(st.sampled_from(keys))] = "__raw__"
        return encode(record).replace(b'"__raw__"', draw(st.sampled_from(RAW_TOKENS)))
    if how == "drop" and keys:
        record.pop(draw(st.sampled_from(keys)))
    elif how == "add":
        record[draw(st.text(max_size=8))] = draw(JSONISH)
    elif how == "nest" and keys:
        key = draw(st.sampled_from(keys))
        record[key] = {"x": [record[key]]}
    elif keys:
        record[draw(st.sampled_from(keys))] = draw(JSONISH)
    return encode(record)


def garbage(valid: bytes) -> st.SearchStrategy[bytes]:
    deep = st.integers(100, 100_000).map(lambda n: b"[" * n)
    deep_object = st.integers(50, 20_000).map(lambda n: b'{"a":' * n)
    return st.one_of(
        st.binary(max_size=300),
        deep,
        deep_object,
        JSONISH.map(encode),
        mutated(valid),
        mutated(valid),
        mutated(valid),
    )


def usable(record: object, parse: Callable[[bytes, str], object]) -> None:
    """What a parser returns can be used: written back, it parses to itself; its times
    compare with now and survive a day's arithmetic."""
    if isinstance(record, Record):
        again = parse(record.to_bytes(), PATH)
        assert again == record
        times = [getattr(record, f.name) for f in fields(record) if f.name in record.times]
        shown = record.as_dict()
    elif isinstance(record, Handle):
        assert parse(record.to_bytes(), PATH) == record
        times = [record.created]
        shown = {**record.summary, "uri": record.uri, "writer": record.writer}
    else:
        raise AssertionError(f"not a record: {record!r}")
    # What the CLI prints and the HTTP API serves: strict JSON, encodable UTF-8.
    json.dumps(shown, allow_nan=False, ensure_ascii=False).encode("utf-8")
    now = datetime.now(UTC)
    for text in times:
        if text is None:
            continue
        moment = text if isinstance(text, datetime) else parse_time(text)
        assert (now - moment) + timedelta(days=1) is not None
        assert moment + timedelta(days=365) > moment
        assert math.isfinite(moment.timestamp())


@pytest.mark.property
@pytest.mark.parametrize("kind", sorted(PARSED))
def test_any_bytes_give_a_record_or_corrupt_record(kind: str) -> None:
    _, parse, valid = PARSED[kind]

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(data=garbage(valid))
    def check(data: bytes) -> None:
        try:
            record = parse(data, PATH)
        except CorruptRecord as exc:
            assert PATH in str(exc)
            return
        usable(record, parse)

    check()
