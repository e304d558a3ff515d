"""The order in which a bucket's files are merged, so that equal sequence numbers have one winner.

Records of a key are merged in (sequence fields, ``_SEQUENCE_NUMBER``) order; the sort is
stable, so when two records of a key carry the same sequence (two writers that started from
the same snapshot, one of them compacted since) the order of the runs decides. Paimon's rule,
from its lookup merge (``LookupMergeFunction.pickHighLevel``: "only the value of the minimum
level should be selected"; ``LookupChangelogMergeFunctionWrapper.calculateResult``: the
high-level record goes in front of a level-0 record only when its sequence is strictly
smaller), pinned by ``LookupChangelogMergeFunctionWrapperTest.testKeepLowestHighLevel``:

* a record at a level >= 1 is merged after level-0 records of the same sequence;
* among levels >= 1, the lowest level is merged last (level 1 after level 2 ...);
* level-0 files are merged oldest first (the reverse of Paimon's level-0 order, newest first).

So on equal sequence numbers the record of the lowest level >= 1 wins, and level 0 loses to
every level >= 1. Engines that keep the last record (deduplicate, partial-update, aggregation)
get the winner merged last; first-row keeps the first record, so its order is the exact
reverse (``first_row=True``). Reads, compaction rewrites and the changelog producers all order
their runs with :func:`merge_order` / :func:`level_groups`, so they agree; a compaction that
lifts a level-0 row above a record that beats it drops the row first (``compact/ties.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from lakecore.format.manifest import DataFileMeta


def level0_order(file: DataFileMeta) -> tuple[int, int, int, str]:
    """Newest first, as Paimon's level-0 TreeSet: larger max sequence number first, then (for
    files from concurrent writers that share it) smaller min sequence number, earlier creation
    time (unknown first), and file name, so the order never depends on input order."""
    created = file.creation_time_millis
    return (
        -file.max_sequence_number,
        file.min_sequence_number,
        -(2**63) if created is None else created,
        file.file_name,
    )


def merge_order(files: Iterable[DataFileMeta], first_row: bool = False) -> list[DataFileMeta]:
    """``files`` as runs to merge, one run per file, in the order that breaks sequence ties
    Paimon's way (see the module docstring)."""
    return [f for group in level_groups(files, first_row) for f in group]


def level_groups(files: Iterable[DataFileMeta],
                 first_row: bool = False) -> list[list[DataFileMeta]]:
    """``files`` grouped into sorted runs for merging: every level-0 file alone, oldest first,
    then one group per level >= 1 from the highest level down to level 1 (``first_row``: the
    reverse). Within a group the input order is kept (give a level's files in key order and
    the group is a sorted run)."""
    level0: list[DataFileMeta] = []
    upper: dict[int, list[DataFileMeta]] = {}
    for f in files:
        if f.level == 0:
            level0.append(f)
        else:
            upper.setdefault(f.level, []).append(f)
    groups = [[f] for f in sorted(level0, key=level0_order, reverse=True)]
    groups.extend(upper[level] for level in sorted(upper, reverse=True))
    return groups[::-1] if first_row else groups


def level0_group_count(groups: Sequence[Sequence[DataFileMeta]]) -> int:
    """How many of ``level_groups``' groups are level-0 files."""
    return sum(1 for g in groups if g and g[0].level == 0)
