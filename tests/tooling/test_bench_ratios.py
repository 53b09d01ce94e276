"""Benchmarks judge the ratio of each run, summarised (issue 60.9), not the median of one
series over the median of the other."""

from __future__ import annotations

import pytest

from benchmarks.common import Result, paired, per_run

pytestmark = pytest.mark.unit


def test_the_ratio_is_the_median_of_the_runs_ratios_and_their_range_is_shown(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Three runs, each side measured under the same load: zkstore is 1.2 times its baseline
    # in every run. The medians (2.4 over 1.0) pair figures of different runs: 2.4.
    ours, baseline = [1.2, 2.4, 12.0], [1.0, 2.0, 10.0]
    result = Result.of_runs("paired", ours, baseline, "<= 1.5")
    assert result.ratio == pytest.approx(1.2)
    assert result.ours / result.baseline == pytest.approx(1.2)  # the medians, only shown
    skewed = Result.of_runs("skewed", [1.2, 3.0, 12.0], [1.0, 1.5, 10.0], "<= 1.5")
    assert skewed.ratio == pytest.approx(1.2) and skewed.met()
    assert skewed.ours / skewed.baseline == pytest.approx(2.0)  # median over median: missed
    skewed.show()
    assert "ratio 1.20, runs 1.20-2.00 of 3 (goal <= 1.5: meets)" in capsys.readouterr().out


def test_paired_runs_measure_both_sides_in_each_run_and_skip_empty_baselines() -> None:
    order: list[str] = []
    ours, baseline = paired(
        2, lambda: order.append("ours") or 2.0, lambda: order.append("base") or 1.0
    )
    assert order == ["ours", "base", "ours", "base"]
    assert (ours, baseline) == ([2.0, 2.0], [1.0, 1.0])
    assert per_run([1.0, 2.0], [0.0, 1.0]) == [2.0]
