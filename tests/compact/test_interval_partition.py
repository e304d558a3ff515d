"""IntervalPartition on Paimon's IntervalPartitionTest cases, plus a hypothesis property:
sections never overlap, every run is sorted and non-overlapping, every file lands once, and a
section has exactly as many runs as its deepest overlap (the minimum possible)."""

from __future__ import annotations

import re
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from lakecore.compact import IntervalPartition, KeyOrder, SortedRun
from tests.compact.helpers import KEY_TYPES, bounds, file

Shape = list[Counter[tuple[tuple[int, int], ...]]]


def parse(text: str) -> list[tuple[int, int]]:
    return [(int(a), int(b)) for a, b in re.findall(r"\[(\d+), (\d+)]", text)]


def shape(sections: list[list[SortedRun]]) -> Shape:
    """Sections as multisets of runs (run order inside a section has no meaning)."""
    return [Counter(tuple(bounds(f) for f in run.files) for run in s) for s in sections]


def expected_shape(text: str) -> Shape:
    return [Counter(tuple(parse(run)) for run in line.split("|")) for line in text.split("\n")]


def partition(intervals: list[tuple[int, int]]) -> list[list[SortedRun]]:
    return IntervalPartition([file(lo, hi) for lo, hi in intervals], KEY_TYPES).partition()


def check(given_text: str, expected: str) -> None:
    assert shape(partition(parse(given_text))) == expected_shape(expected)


def test_same_min_key() -> None:
    # Paimon: IntervalPartitionTest.testSameMinKey
    check("[100, 200], [100, 400], [100, 300], [100, 500]",
          "[100, 200] | [100, 300] | [100, 400] | [100, 500]")


def test_same_max_key() -> None:
    # Paimon: IntervalPartitionTest.testSameMaxKey
    check("[100, 500], [300, 500], [200, 500], [400, 500]",
          "[100, 500] | [200, 500] | [300, 500] | [400, 500]")


def test_section_partitioning() -> None:
    # Paimon: IntervalPartitionTest.testSectionPartitioning; touching ranges ([0, 9] and
    # [9, 15]) share a key, so they overlap and stay in one section
    check("[0, 9], [5, 7], [9, 15], [16, 22], [16, 28], [24, 32]",
          "[0, 9] | [5, 7], [9, 15]\n[16, 22], [24, 32] | [16, 28]")


def test_empty_and_single() -> None:
    assert partition([]) == []
    assert shape(partition([(3, 4)])) == expected_shape("[3, 4]")


def test_adjacent_keys_are_separate_sections() -> None:
    check("[0, 4], [5, 9]", "[0, 4]\n[5, 9]")


intervals = st.lists(
    st.tuples(st.integers(0, 60), st.integers(0, 12)).map(lambda t: (t[0], t[0] + t[1])),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(intervals)
def test_partition_properties(spans: list[tuple[int, int]]) -> None:
    # Paimon: IntervalPartitionTest.randomTest, strengthened
    files = [file(lo, hi) for lo, hi in spans]
    sections = IntervalPartition(files, KEY_TYPES).partition()
    keys = KeyOrder(KEY_TYPES)
    placed = [f.file_name for s in sections for run in s for f in run.files]
    assert sorted(placed) == sorted(f.file_name for f in files)
    ranges = []
    for section in sections:
        members = [bounds(f) for run in section for f in run.files]
        for run in section:
            run.validate(keys)  # sorted, non-overlapping
        depth = max(sum(lo <= k <= hi for lo, hi in members)
                    for k in range(min(m[0] for m in members), max(m[1] for m in members) + 1))
        assert len(section) == depth
        ranges.append((min(m[0] for m in members), max(m[1] for m in members)))
    for (_, prev_hi), (next_lo, _) in zip(ranges, ranges[1:]):
        assert prev_hi < next_lo  # sections in key order, never overlapping
