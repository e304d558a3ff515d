"""``group_codes``: rows grouped by equal values of some columns without moving them, the
groups numbered in the order of their values (ascending, nulls first, as partitions are
listed); ``group_by_columns`` cuts the rows by them. The routing cuts partitions with them.
The reference is plain Python over the rows. Also ``bool_array``, the
selections filters take (same module)."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pytest

from lakecore.utils.arrow import bool_array, group_by_columns, group_codes


def _random_table(rows: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    nulls = rng.random(rows) < 0.1
    return pa.table({
        "s": pa.array([f"p{v}" for v in rng.integers(0, 7, rows)], mask=nulls),
        "i": pa.array(rng.integers(-3, 4, rows), pa.int32(), mask=rng.random(rows) < 0.05),
        "d": pa.array([dt.date(2026, 1, 1) + dt.timedelta(days=int(v))
                       for v in rng.integers(0, 5, rows)]),
        "row": pa.array(np.arange(rows)),
    })


@pytest.mark.parametrize("names", [["s"], ["i"], ["d", "s"], ["s", "i", "d"]])
@pytest.mark.parametrize("seed", [1, 2])
def test_codes_group_and_order_rows_as_a_sort_would(names, seed):
    table = _random_table(3_000, seed)
    codes, values, arrays = group_codes(table, names)
    expected = _reference(table, names)
    assert values == list(expected)
    # the groups' values as Arrow holds them: the column's type, one value per group
    assert [a.type for a in arrays] == [table.schema.field(n).type for n in names]
    assert list(zip(*(a.to_pylist() for a in arrays))) == values
    rows = table.column("row").to_numpy()
    for code, value in enumerate(values):
        assert rows[codes == code].tolist() == expected[value]
    groups = group_by_columns(table, names)
    assert [v for v, _ in groups] == list(expected)
    for value, part in groups:
        assert part.column("row").to_pylist() == expected[value]  # input order kept


def _reference(table: pa.Table, names: list[str]) -> dict[tuple, list[int]]:
    """Each distinct value tuple (ascending, nulls first) and its rows, in row order."""
    groups: dict[tuple, list[int]] = {}
    for row in table.to_pylist():
        groups.setdefault(tuple(row[n] for n in names), []).append(row["row"])
    order = sorted(groups, key=lambda v: tuple((x is not None, x) for x in v))
    return {v: groups[v] for v in order}


def test_many_sparse_groups_are_renumbered():
    """Four columns of 50 values each: 6.25M possible groups, a few hundred present."""
    rng = np.random.default_rng(3)
    rows = 600
    table = pa.table({c: pa.array(rng.integers(0, 50, rows)) for c in "abcd"})
    codes, values, _ = group_codes(table, list("abcd"))
    assert values == list(_reference(table.append_column("row", pa.array(range(rows))),
                                     list("abcd")))
    assert codes.max() == len(values) - 1 and len(np.unique(codes)) == len(values)


def test_no_columns_and_no_rows():
    table = _random_table(10, 4)
    codes, values, _ = group_codes(table, [])
    assert values == [()] and not codes.any() and len(codes) == 10
    codes, values, _ = group_codes(table.slice(0, 0), ["s"])
    assert values == [] and len(codes) == 0
    assert group_by_columns(table.slice(0, 0), ["s"]) == []
    ((value, part),) = group_by_columns(table.filter(pa.array([True] + [False] * 9)), ["s", "i"])
    assert part.num_rows == 1 and value == (table["s"][0].as_py(), table["i"][0].as_py())


@pytest.mark.parametrize("rows", [0, 1, 7, 8, 9, 1000, 100_003])
def test_a_numpy_mask_becomes_the_same_arrow_selection_for_every_length_and_view(
        rows: int) -> None:
    """``bool_array``: a filter's selection, packed to bits; the same values as Arrow's own
    conversion, for any length (partial last byte), a slice and a strided view, and a
    slice of the result selects the same rows as a slice of the mask."""
    rng = np.random.default_rng(rows)
    mask = rng.random(rows) > 0.3
    for view in (mask, mask[3:], mask[::3]):
        got = bool_array(view)
        got.validate(full=True)
        assert got.null_count == 0 and got.to_pylist() == view.tolist()
    table = pa.table({"v": np.arange(rows)})
    assert table.filter(bool_array(mask)).column("v").to_pylist() == np.flatnonzero(mask).tolist()
    if rows > 10:
        part = bool_array(mask).slice(5, rows - 10)
        assert (table.slice(5, rows - 10).filter(part).column("v").to_pylist()
                == (np.flatnonzero(mask[5:rows - 5]) + 5).tolist())
