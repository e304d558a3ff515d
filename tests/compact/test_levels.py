"""Levels, SortedRun and Levels.update as a diff (Paimon: LevelsTest, LevelsOrderingFixTest)."""

from __future__ import annotations

import pytest

from lakecore.compact import CompactResult, KeyOrder, Levels, SortedRun
from lakecore.format.manifest import DataFileMeta
from tests.compact.helpers import KEY_TYPES, file, layout


def levels(files: list[DataFileMeta], num_levels: int = 3) -> Levels:
    return Levels(KEY_TYPES, files, num_levels)


@pytest.mark.parametrize(
    "file_levels, expected", [([], -1), ([0, 0], 0), ([0, 1], 1), ([0, 1, 2], 2)]
)
def test_non_empty_highest_level(file_levels: list[int], expected: int) -> None:
    # Paimon: LevelsTest.testNonEmptyHighestLevelNo / ...Level0 / ...Level1 / ...Level2
    lv = levels([file(0, 0, level=lvl, max_seq=1) for lvl in file_levels])
    assert lv.non_empty_highest_level() == expected


def test_level0_keeps_files_with_same_sequence_numbers() -> None:
    # Paimon: LevelsTest.testLevel0WithSameSequenceNumbers
    lv = levels([file(0, 0, max_seq=1), file(0, 0, max_seq=1)])
    assert len(lv.all_files()) == 2 and len(lv.level0) == 2


def test_level0_newest_first_with_deterministic_ties() -> None:
    # Paimon: LevelsOrderingFixTest.testIssue5872FixDeterministicOrdering: on equal max
    # sequence numbers the smaller min sequence number comes first, whatever the input order
    earlier = file(name="z-file", min_seq=98, max_seq=100, created=1000)
    later = file(name="a-file", min_seq=99, max_seq=100, created=1001)
    newest = file(name="m-file", min_seq=101, max_seq=105)
    for files in ([earlier, later, newest], [newest, later, earlier]):
        assert [f.file_name for f in levels(files, 2).level0] == ["m-file", "z-file", "a-file"]


def test_level0_ties_on_creation_time_then_name() -> None:
    a = file(name="b", min_seq=1, max_seq=2, created=5)
    b = file(name="a", min_seq=1, max_seq=2, created=6)
    c = file(name="c", min_seq=1, max_seq=2, created=6)
    assert [f.file_name for f in levels([c, b, a]).level0] == ["b", "a", "c"]


def test_runs_and_counts() -> None:
    l0_old = file(1, 5, max_seq=1)
    l0_new = file(3, 9, max_seq=2)
    l2a, l2b = file(10, 19, level=2), file(0, 9, level=2)
    lv = levels([l0_old, l2a, l0_new, l2b], 4)
    runs = lv.level_sorted_runs()
    assert [r.level for r in runs] == [0, 0, 2]
    assert runs[0].run.files == (l0_new,) and runs[2].run.files == (l2b, l2a)
    assert lv.number_of_sorted_runs() == 3
    assert (lv.number_of_levels, lv.max_level) == (4, 3)
    assert lv.run_of_level(1).is_empty() and lv.run_of_level(2).total_size == 20
    assert lv.total_file_size() == 5 + 7 + 20
    assert lv.all_files() == [l0_new, l0_old, l2b, l2a]


def test_restored_levels_grow_to_fit_files() -> None:
    lv = levels([file(0, 1, level=5)], 3)
    assert lv.max_level == 5 and lv.non_empty_highest_level() == 5


def test_at_least_two_levels() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        levels([], 1)


def test_overlapping_files_in_a_level_are_rejected() -> None:
    with pytest.raises(ValueError, match="overlapping"):
        levels([file(0, 5, level=1), file(5, 9, level=1)])


def test_update_applies_result_as_a_diff_and_leaves_old_value() -> None:
    a, b = file(0, 4, max_seq=1), file(3, 8, max_seq=2)
    up = file(20, 29, max_seq=3)
    keep = file(40, 49, level=2)
    before = levels([a, b, up, keep])
    merged = file(0, 8, level=2, max_seq=2)
    result = CompactResult((a, b, up), (merged, up.upgrade(2)))
    after = before.update(result.before, result.after)
    assert layout(after) == [(2, 0, 8), (2, 20, 29), (2, 40, 49)]
    assert after.level0 == () and after.number_of_sorted_runs() == 1
    assert len(before.level0) == 3 and before.number_of_sorted_runs() == 4  # unchanged


def test_add_level0_file() -> None:
    lv = levels([file(0, 1, max_seq=1)]).add_level0_file(file(0, 1, max_seq=7, name="new"))
    assert lv.level0[0].file_name == "new"
    with pytest.raises(ValueError, match="not 0"):
        lv.add_level0_file(file(level=1))


def test_update_rejects_unknown_or_out_of_range_files() -> None:
    lv = levels([file(0, 1)])
    with pytest.raises(ValueError, match="is not at level"):
        lv.update([file(0, 1)], [])
    with pytest.raises(ValueError, match="outside"):
        lv.update([], [file(5, 6, level=3)])
    with pytest.raises(ValueError, match="overlapping"):
        lv.update([], [file(0, 5, level=1), file(5, 9, level=1)])
    f = lv.level0[0]
    with pytest.raises(ValueError, match="twice"):
        lv.update([], [f.upgrade(1)])


def test_sorted_run_helpers() -> None:
    keys = KeyOrder(KEY_TYPES)
    a, b = file(0, 4), file(5, 9)
    run = SortedRun.from_unsorted([b, a], keys)
    assert run.files == (a, b) and run.total_size == 10 and run.non_empty()
    assert SortedRun.empty().is_empty() and SortedRun.empty().total_size == 0
    assert SortedRun.from_single(a) == SortedRun((a,))


def test_key_order_sorts_by_value_with_nulls_first() -> None:
    from lakecore.format.binary_row import encode_row
    from lakecore.schema.types import parse_type

    types = [parse_type("STRING"), parse_type("BIGINT")]
    keys = KeyOrder(types)
    rows = [("b", 1), ("a", 300), (None, 5), ("a", -2)]
    ordered = sorted(rows, key=lambda r: keys(encode_row(list(r), types)))
    assert ordered == [(None, 5), ("a", -2), ("a", 300), ("b", 1)]
