"""The job timeline picture (issue 27): parsed back as XML, one bar per attempt, coloured by how
it ended, every text escaped, and bounded in size however long the job's history."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta

import pytest

from recovery.observe.timeline import (
    CANCELLED,
    FAILED,
    LOST,
    MAX_ATTEMPTS,
    MAX_MARKS,
    MAX_ROWS,
    MAX_TICKS,
    OUTCOMES,
    RUNNING,
    SUCCEEDED,
    AttemptSpan,
    Mark,
    Timeline,
    render_svg,
)

pytestmark = pytest.mark.unit

NS = "{http://www.w3.org/2000/svg}"
T0 = datetime(2026, 11, 23, 12, 0, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)


def bars(root: ET.Element) -> list[ET.Element]:
    return [r for r in root.iter(f"{NS}rect") if "attempt" in r.get("class", "").split()]


def a_job() -> Timeline:
    return Timeline(
        job_id="etl-daily",
        attempts=[
            AttemptSpan(1, "host-a", at(0), at(20), LOST, "host-a was lost"),
            AttemptSpan(2, "host-b", at(22), at(40), FAILED, "ValueError: bad row"),
            AttemptSpan(3, "host-a", at(45), at(80), CANCELLED),
            AttemptSpan(4, "host-c", at(85), None, RUNNING),
        ],
        now=at(100),
        checkpoints=[at(10), at(30), at(60)],
        control_changes=[Mark(at(50), "version 3: batch.size=100")],
        leader_changes=[Mark(at(21), "host-b leads")],
    )


def test_one_bar_per_attempt_on_its_daemons_row() -> None:
    root = parse(render_svg(a_job()))
    found = bars(root)
    assert [b.get("data-attempt") for b in found] == ["1", "2", "3", "4"]
    y = {b.get("data-attempt"): b.get("y") for b in found}
    assert y["1"] == y["3"]  # both on host-a's row
    assert len({y["1"], y["2"], y["4"]}) == 3
    labels = [t.text for t in root.iter(f"{NS}text") if t.get("class") == "daemon"]
    assert labels == ["host-a", "host-b", "host-c"]


def test_bars_are_coloured_by_how_the_attempt_ended() -> None:
    outcomes = [SUCCEEDED, FAILED, LOST, CANCELLED, RUNNING]
    timeline = Timeline(
        "j",
        [
            AttemptSpan(i + 1, "d", at(i * 10), None if o == RUNNING else at(i * 10 + 5), o)
            for i, o in enumerate(outcomes)
        ],
        now=at(60),
    )
    found = bars(parse(render_svg(timeline)))
    assert [b.get("fill") for b in found] == [OUTCOMES[o][0] for o in outcomes]
    assert len({b.get("fill") for b in found}) == len(outcomes)
    assert [b.get("class") for b in found] == [f"attempt {OUTCOMES[o][1]}" for o in outcomes]


def test_a_bar_spans_placement_to_end_and_a_running_one_reaches_now() -> None:
    found = {b.get("data-attempt"): b for b in bars(parse(render_svg(a_job())))}

    def right(bar: ET.Element) -> float:
        return float(bar.get("x", 0)) + float(bar.get("width", 0))

    assert float(found["1"].get("x", 0)) < float(found["2"].get("x", 0))
    assert right(found["1"]) < float(found["2"].get("x", 0))  # lost at 20, next placed at 22
    assert right(found["4"]) == pytest.approx(right(max(found.values(), key=right)))
    tip = found["4"].find(f"{NS}title")
    assert tip is not None and "still running" in (tip.text or "")


def test_checkpoints_controls_and_leader_changes_are_drawn() -> None:
    root = parse(render_svg(a_job()))
    classes = [e.get("class") for e in root.iter()]
    assert classes.count("checkpoint") == 3
    assert classes.count("control-change") == 1
    assert classes.count("leader-change") == 1
    tips = [t.text or "" for t in root.iter(f"{NS}title")]
    assert any("batch.size=100" in t for t in tips)
    assert any("host-b leads" in t for t in tips)
    assert any("ValueError: bad row" in t for t in tips)
    ticks = [t.text for t in root.iter(f"{NS}text") if t.get("class") == "tick"]
    assert 2 <= len(ticks) <= 10 and all(t and t.count(":") == 2 for t in ticks)


def test_hostile_text_is_escaped_and_nothing_active_is_emitted() -> None:
    hostile = "<script>alert(1)</script>\"' onload=x ]]>&amp;\x00\x1b\ud800\ufffe"
    timeline = Timeline(
        job_id=hostile,
        attempts=[
            AttemptSpan(1, hostile, at(0), at(5), FAILED, hostile),
            AttemptSpan(2, "x" * 5000, at(6), None, "NOT-A-STATE", hostile * 100),
        ],
        now=at(10),
        control_changes=[Mark(at(3), hostile)],
        leader_changes=[Mark(at(4), hostile)],
    )
    svg = render_svg(timeline)
    root = parse(svg)  # well-formed XML despite control characters and lone surrogates
    svg.encode("utf-8")  # and encodable
    for element in root.iter():
        assert element.tag.removeprefix(NS) not in ("script", "a", "foreignObject", "image")
        for name, value in element.attrib.items():
            assert not name.lower().startswith("on")
            assert "href" not in name.lower()
            assert "javascript:" not in value.lower()
    texts = [e.text or "" for e in root.iter()]
    assert any("<script>alert(1)</script>" in t for t in texts)  # shown, as text
    assert all(len(t) <= 300 for t in texts)
    assert bars(root)[1].get("fill") == OUTCOMES[FAILED][0]  # an unknown outcome: drawn as failed


def test_a_thousand_attempts_stay_bounded() -> None:
    timeline = Timeline(
        job_id="flaky",
        attempts=[
            AttemptSpan(i + 1, f"daemon-{i % 400}", at(i * 60), at(i * 60 + 30), LOST, "x" * 500)
            for i in range(1000)
        ],
        now=at(60_000),
        checkpoints=[at(i * 7) for i in range(10_000)],
        control_changes=[Mark(at(i * 13), "v") for i in range(1000)],
        leader_changes=[Mark(at(i * 17), "l") for i in range(1000)],
    )
    svg = render_svg(timeline)
    root = parse(svg)
    assert len(bars(root)) == MAX_ATTEMPTS
    assert [b.get("data-attempt") for b in bars(root)][-1] == "1000"
    rows = [e for e in root.iter(f"{NS}rect") if e.get("class") == "row"]
    assert len(rows) == MAX_ROWS
    labels = [t.text or "" for t in root.iter(f"{NS}text") if t.get("class") == "daemon"]
    assert labels[-1].startswith("other daemons")
    classes = [e.get("class") for e in root.iter()]
    assert classes.count("checkpoint") <= MAX_TICKS
    assert classes.count("control-change") <= MAX_MARKS
    assert classes.count("leader-change") <= MAX_MARKS
    hidden = [t.text for t in root.iter(f"{NS}text") if t.get("class") == "hidden-attempts"]
    assert hidden == ["900 earlier attempts not drawn"]
    assert len(svg) < 120_000
    assert int(root.get("height", 0)) < 600


def test_a_job_without_attempts_and_an_instant_attempt_render() -> None:
    parse(render_svg(Timeline("waiting", [], now=T0)))
    root = parse(render_svg(Timeline("j", [AttemptSpan(1, "d", T0, T0, SUCCEEDED)], now=T0)))
    (bar,) = bars(root)
    assert float(bar.get("width", 0)) >= 2.0  # visible however short
