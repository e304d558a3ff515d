"""Append-only compaction planning on Paimon's reference cases: AppendCompactCoordinatorTest
(unaware-bucket bin-packing), BucketedAppendCompactManagerTest (pickCompactBefore) and
FullCompactTaskTest (bucketed full compaction)."""

from __future__ import annotations

import pytest

from lakecore.compact import AppendCompaction, full_bucketed, pack_unaware, pick_bucketed
from lakecore.format.manifest import DataFileMeta
from lakecore.options import CoreOptions
from tests.compact.helpers import file

MB = 1 << 20
TARGET = 256 * MB  # append tables' default target-file-size


def sized(n: int, size: int) -> list[DataFileMeta]:
    return [file(size=size) for _ in range(n)]


def packs(files: list[DataFileMeta]) -> list[tuple[DataFileMeta, ...]]:
    # The coordinator test table sets compaction.min.file-num = 3
    return pack_unaware(files, target_file_size=TARGET, compaction_file_size=int(TARGET * 0.7),
                        open_file_cost=4 * MB, min_file_num=3)


@pytest.mark.parametrize(
    "count, size, tasks",
    [
        (200, 0, 2),  # testForCompactPlan: open-file cost alone fills bins of 128
        (100, 2**62, 0),  # testNoCompactTask: large files are left alone
        (100, TARGET // 3 + 1, 17),  # testMinSizeCompactTask
        (100, TARGET // 10 * 8, 0),  # testFilterMiddleFile: above the small-file ratio
        (1000, TARGET // 10, 56),  # testCompactGroupSplit (first round)
        (1050, TARGET // 5, 105),  # testCompactGroupSplit (second round)
        (1089, TARGET // 5, 109),  # testCompactGroupSplit2
    ],
)
def test_unaware_bucket_packing(count: int, size: int, tasks: int) -> None:
    # Paimon: AppendCompactCoordinatorTest.<case named above>
    groups = packs(sized(count, size))
    assert len(groups) == tasks
    assert len({f.file_name for g in groups for f in g}) == sum(len(g) for g in groups)


def test_unaware_too_few_leftovers_wait() -> None:
    assert packs(sized(2, 0)) == []  # testCompactLessFile, before any ageing
    small = sized(3, MB)
    assert packs(small) == [tuple(small)]


def test_packing_goes_smallest_first() -> None:
    files = [file(size=s * MB, name=f"s{s}") for s in (9, 1, 5, 3)]
    (group,) = packs(files)
    assert [f.file_name for f in group] == ["s1", "s3", "s5", "s9"]


def seq(lo: int, hi: int) -> DataFileMeta:
    """Paimon's ``newFile(minSeq, maxSeq)``: size = number of sequence numbers."""
    return file(name=f"seq-{lo}-{hi}", size=hi - lo + 1, min_seq=lo, max_seq=hi)


@pytest.mark.parametrize(
    "files, remaining",
    [
        # testPickEmptyAndNotRelease
        ([(1, 50)], [(1, 50)]),
        # testPickEmptyAndRelease
        ([(1, 2048)], []),
        ([(1, 2048), (2049, 2100)], [(2049, 2100)]),
        ([(1, 2048), (2049, 2100), (2101, 2110)], [(2049, 2100), (2101, 2110)]),
        ([(1, 2048), (2049, 4096), (4097, 5000)], [(4097, 5000)]),
        ([(1, 1024), (1025, 2049), (2050, 2500), (2501, 4096), (4097, 6000), (6001, 7000),
          (7001, 7600)], [(6001, 7000), (7001, 7600)]),
        ([(1, 2048), (2049, 4096), (4097, 4100), (4101, 6150)], [(4101, 6150)]),
        ([(1, 2048), (2049, 4096), (4097, 5000), (5001, 6144), (6145, 7048)], [(6145, 7048)]),
        ([(1, 500), (501, 1000)], [(1, 500), (501, 1000)]),
        ([(1, 500), (501, 1000), (1001, 2048)], [(501, 1000), (1001, 2048)]),
        ([(1, 2050), (2051, 2100), (2101, 2110)], [(2051, 2100), (2101, 2110)]),
    ],
)
def test_bucketed_pick_waits_and_releases(
    files: list[tuple[int, int]], remaining: list[tuple[int, int]]
) -> None:
    # Paimon: BucketedAppendCompactManagerTest.testPickEmptyAndNotRelease /
    # testPickEmptyAndRelease (min-file-num 4, target 1024)
    pick = pick_bucketed([seq(*s) for s in reversed(files)], min_file_num=4,
                         target_file_size=1024)
    assert pick.compact_before is None
    assert pick.remaining == tuple(seq(*s) for s in remaining)


def test_bucketed_pick_takes_window_of_min_file_num() -> None:
    files = [seq(1, 2), seq(3, 500), seq(501, 1000), seq(1001, 1025), seq(1026, 1050)]
    pick = pick_bucketed(files, min_file_num=4, target_file_size=1024)
    assert pick.compact_before == tuple(files[:4]) and pick.remaining == (files[4],)


@pytest.mark.parametrize(
    "files",
    [
        [],
        [(1, 10)],
        [(1, 1024)],
        [(1, 1024), (1025, 2048), (2049, 3200)],
        [(1, 1024), (1025, 2048), (2049, 3200), (3201, 3220), (3221, 3280)],
        [(1, 1024 // 10 * 8)],
    ],
)
def test_bucketed_full_compaction_nothing_to_do(files: list[tuple[int, int]]) -> None:
    # Paimon: FullCompactTaskTest.testNoCompact (+ the manager's 3-file minimum)
    assert full_bucketed([seq(*s) for s in files], compaction_file_size=1024 // 10 * 7) == ()


@pytest.mark.parametrize(
    "files, before",
    [
        ([(1, 500), (501, 1000), (1001, 1010), (1011, 1024), (1025, 3000)],
         [(1, 500), (501, 1000), (1001, 1010), (1011, 1024), (1025, 3000)]),
        ([(1, 1025), (1026, 1080), (1090, 1500), (1600, 1900)],  # large head kept
         [(1026, 1080), (1090, 1500), (1600, 1900)]),
    ],
)
def test_bucketed_full_compaction(
    files: list[tuple[int, int]], before: list[tuple[int, int]]
) -> None:
    # Paimon: FullCompactTaskTest.testCompact
    got = full_bucketed([seq(*s) for s in files], compaction_file_size=1024 // 10 * 7)
    assert got == tuple(seq(*s) for s in before)


def test_bucketed_full_compaction_forced() -> None:
    files = [seq(1, 2000)]
    assert full_bucketed(files, compaction_file_size=700, force_rewrite_all_files=True) == (
        seq(1, 2000),
    )


def test_append_compaction_from_options() -> None:
    ac = AppendCompaction.from_options(CoreOptions.from_map({"target-file-size": "64 mb"}))
    assert (ac.target_file_size, ac.compaction_file_size) == (64 * MB, int(64 * MB * 0.7))
    assert (ac.min_file_num, ac.open_file_cost) == (5, 4 * MB)
    default = AppendCompaction.from_options(CoreOptions.from_map({}))
    assert default.target_file_size == TARGET
