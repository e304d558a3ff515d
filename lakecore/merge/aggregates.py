"""Paimon's field aggregators, evaluated for all key groups at once.

Every aggregator is a fold over the records of a group in merge order: ``agg`` for +I/+U and
``retract`` for -U/-D (Paimon's ``FieldAggregator``). Here each fold is rewritten as
reductions over group boundaries (``np.*.reduceat``), "pick one row per group" index
arithmetic, or ``pyarrow`` hash aggregation, so no Python code runs per row. The only
sequential fold left, a ``product`` that also divides out retractions (Java's truncating
integer division is not a reduction), loops over positions within a group, vectorized across
the groups that need it.

Rows outside the fold (``active`` False) are ignored: records before a delete that resets the
row, or a group whose single record is passed through unmerged.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from functools import cached_property

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakecore.errors import MergeError
from lakecore.merge.spec import RETRACTABLE
from lakecore.options import AggregateFunction


@dataclass(frozen=True, eq=False)
class Groups:
    """Contiguous row groups: ``starts`` (ascending, non-empty groups) and each row's ``gid``.

    Reductions skip the single-record groups (their result is the record itself) because
    ``reduceat`` pays per segment, and a flush is mostly keys written once.
    """

    starts: np.ndarray
    n: int

    @property
    def count(self) -> int:
        return len(self.starts)

    @cached_property
    def ends(self) -> np.ndarray:
        return np.append(self.starts[1:], self.n)

    @cached_property
    def sizes(self) -> np.ndarray:
        return self.ends - self.starts

    @cached_property
    def gid(self) -> np.ndarray:
        """The group of every row."""
        return np.repeat(np.arange(self.count, dtype=np.int64), self.sizes)

    @cached_property
    def _multi(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Groups with several rows, their rows, and where each starts among those rows."""
        multi = self.sizes > 1
        rows = np.flatnonzero(np.repeat(multi, self.sizes))
        local = np.zeros(int(multi.sum()), dtype=np.int64)
        np.cumsum(self.sizes[multi][:-1], out=local[1:])
        return multi, rows, local

    def reduce(self, ufunc: np.ufunc, x: np.ndarray) -> np.ndarray:
        """``ufunc.reduceat(x, starts)`` in ``x``'s dtype (small integers wrap like Java's
        instead of widening), with one-row groups taken as they are."""
        if self.count * 2 < self.n:  # mostly multi-row groups: plain reduceat is cheaper
            return ufunc.reduceat(x, self.starts, dtype=x.dtype)
        out = x[self.starts]
        multi, rows, local = self._multi
        if len(local):
            out[multi] = ufunc.reduceat(x[rows], local, dtype=x.dtype)
        return out

    def last_index(self, mask: np.ndarray) -> np.ndarray:
        """Per group, the last row where ``mask`` holds, or -1."""
        if mask.all():
            return self.ends - 1
        rows = np.where(mask, np.arange(self.n, dtype=np.int64), -1)
        return self.reduce(np.maximum, rows)

    def first_index(self, mask: np.ndarray) -> np.ndarray:
        """Per group, the first row where ``mask`` holds, or -1."""
        if mask.all():
            return self.starts.copy()
        rows = np.where(mask, np.arange(self.n, dtype=np.int64), self.n)
        first = self.reduce(np.minimum, rows)
        first[first == self.n] = -1
        return first

    def count_where(self, mask: np.ndarray) -> np.ndarray:
        if mask.all():
            return self.sizes
        return self.reduce(np.add, mask.astype(np.int64))


class RetractionError(Exception):
    """A -U/-D the aggregator cannot take: ``row`` is the first such record, ``reason`` says
    why. The merge function turns it into a MergeError that names the key."""

    def __init__(self, func: AggregateFunction, row: int, reason: str) -> None:
        super().__init__(func.value, row, reason)
        self.func = func
        self.row = row
        self.reason = reason


def take_or_null(arr: pa.Array, idx: np.ndarray) -> pa.Array:
    """``arr[idx]`` with -1 meaning null."""
    return arr.take(pa.array(idx, type=pa.int64(), mask=idx < 0))


def aggregate(
    func: AggregateFunction,
    arr: pa.Array,
    groups: Groups,
    active: np.ndarray,
    retract: np.ndarray,
    *,
    ignore_retract: bool = False,
    delimiter: str = ",",
    seen: np.ndarray | None = None,
) -> pa.Array:
    """One output value per group: ``func`` folded over the group's active rows.

    ``retract`` marks -U/-D rows. ``ignore_retract`` is FieldIgnoreRetractAgg: retractions
    leave the accumulator unchanged. ``seen`` (default ``active``) are all rows Paimon would
    feed to the aggregator, including those a later delete discards: a retraction among them
    that ``func`` cannot take raises :class:`RetractionError`, as Java would.
    """
    seen = active if seen is None else seen
    if ignore_retract:
        active, seen = active & ~retract, seen & ~retract
    retracting = seen & retract
    if func not in RETRACTABLE and retracting.any():
        row = int(np.flatnonzero(retracting)[0])
        raise RetractionError(func, row, "does not support retraction")
    valid = _valid(arr)
    if func is AggregateFunction.PRODUCT and pa.types.is_integer(arr.type):
        zero = retracting & valid & (arr.fill_null(1).to_numpy(zero_copy_only=False) == 0)
        if zero.any():  # Java's integer division throws wherever the row falls
            raise RetractionError(func, int(np.flatnonzero(zero)[0]), "divides by zero")
    if func is AggregateFunction.PRIMARY_KEY:  # agg and retract both take the input
        return take_or_null(arr, groups.last_index(active))
    if func in (AggregateFunction.LAST_VALUE, AggregateFunction.LAST_NON_NULL_VALUE):
        # last_value: a retraction sets null; last_non_null_value: a non-null retraction sets
        # null, a null input (either kind) leaves the accumulator alone.
        mask = active if func is AggregateFunction.LAST_VALUE else active & valid
        idx = groups.last_index(mask)
        hit = idx >= 0
        idx[hit & retract[np.maximum(idx, 0)]] = -1
        return take_or_null(arr, idx)
    if func is AggregateFunction.FIRST_VALUE:
        return take_or_null(arr, groups.first_index(active))
    if func is AggregateFunction.FIRST_NON_NULL_VALUE:
        return take_or_null(arr, groups.first_index(active & valid))
    if func is AggregateFunction.SUM:
        return _sum(arr, groups, active & valid, retract)
    if func is AggregateFunction.PRODUCT:
        return _product(arr, groups, active & valid, retract)
    if func in (AggregateFunction.MIN, AggregateFunction.MAX):
        return _min_max(func, arr, groups, active & valid)
    if func in (AggregateFunction.BOOL_AND, AggregateFunction.BOOL_OR):
        return _bool(func, arr, groups, active & valid)
    if func is AggregateFunction.LISTAGG:
        return _listagg(arr, groups, active & valid, delimiter)
    raise MergeError(f"aggregate function {func.value!r} is not implemented")


def _valid(arr: pa.Array) -> np.ndarray:
    if arr.null_count == 0:
        return np.ones(len(arr), dtype=bool)
    return arr.is_valid().to_numpy(zero_copy_only=False)


def _numbers(arr: pa.Array, func: AggregateFunction) -> np.ndarray:
    t = arr.type
    if not (pa.types.is_integer(t) or pa.types.is_floating(t)):
        raise MergeError(f"{func.value} needs a numeric column, got {t}")
    return arr.fill_null(0).to_numpy(zero_copy_only=False)


def _from_numpy(values: np.ndarray, present: np.ndarray, type_: pa.DataType) -> pa.Array:
    return pa.array(values, type=type_, mask=~present)


def _sum(arr: pa.Array, groups: Groups, use: np.ndarray, retract: np.ndarray) -> pa.Array:
    """FieldSumAgg: null + x = x, acc - x for a retraction (null - x = -x); null if no input.

    Integer overflow wraps, as Java's ``int``/``long`` arithmetic does.
    """
    present = groups.count_where(use) > 0
    if pa.types.is_decimal(arr.type):
        return _decimal_sum(arr, groups, use, retract, present)
    x = _numbers(arr, AggregateFunction.SUM)
    signed = np.where(retract, -x, x)
    identity = -0.0 if x.dtype.kind == "f" else 0
    total = groups.reduce(np.add, np.where(use, signed, identity).astype(x.dtype, copy=False))
    return _from_numpy(total, present, arr.type)


def _decimal_sum(
    arr: pa.Array, groups: Groups, use: np.ndarray, retract: np.ndarray, present: np.ndarray
) -> pa.Array:
    """Decimal sums through Arrow; a sum beyond the column's precision is null, as Paimon's
    ``Decimal.fromBigDecimal`` returns null on overflow."""
    t = arr.type
    signed = pc.if_else(pa.array(retract), pc.negate(arr), arr)
    sums = _hash_agg(signed, groups, use, "sum")
    limit = pa.scalar(Decimal(10) ** (t.precision - t.scale), sums.type)
    fits = pc.and_(pc.less(sums, limit), pc.greater(sums, pc.negate(limit)))
    fitted = pc.if_else(fits, sums, pa.scalar(None, sums.type))
    return fitted.cast(t)


def _product(arr: pa.Array, groups: Groups, use: np.ndarray, retract: np.ndarray) -> pa.Array:
    """FieldProductAgg: null * x = x, acc / x for a retraction and null / x = 1 / x
    (FieldAggregatorTest.testFieldProductIntAgg: retract(null, 5) == 0); integer products wrap
    and integer division truncates toward zero, like Java."""
    if pa.types.is_decimal(arr.type):
        raise MergeError("product on DECIMAL columns is not supported")
    x = _numbers(arr, AggregateFunction.PRODUCT)
    present = groups.count_where(use) > 0
    one = np.ones(1, dtype=x.dtype)[0]
    out = groups.reduce(np.multiply, np.where(use, x, one).astype(x.dtype, copy=False))
    dividing = use & retract
    if dividing.any():
        # Groups with a division are folded in order: a product mixed with truncating
        # divisions is not a reduction.
        hit = groups.count_where(dividing) > 0
        rows = np.flatnonzero(use & hit[groups.gid])
        out[hit] = _fold_product(x, rows, retract, groups)[hit]
    return _from_numpy(out, present, arr.type)


def _fold_product(
    x: np.ndarray, rows: np.ndarray, retract: np.ndarray, groups: Groups
) -> np.ndarray:
    """Sequential product/division over ``rows`` (ascending), one step per position in group,
    every step vectorized across the groups that have a row at that position."""
    acc = np.zeros(groups.count, dtype=x.dtype)
    g = groups.gid[rows]
    rank = np.arange(len(rows)) - np.searchsorted(g, g, side="left")
    order = np.argsort(rank, kind="stable")
    bounds = np.searchsorted(rank[order], np.arange(rank.max(initial=-1) + 2))
    one = np.ones(1, dtype=x.dtype)[0]
    for k in range(len(bounds) - 1):
        at = rows[order[bounds[k]:bounds[k + 1]]]
        gg, v, r = groups.gid[at], x[at], retract[at]
        # The first input starts the product (a retraction starts it at 1 / x).
        a = np.full(len(at), one) if k == 0 else acc[gg]
        quotient = _divide(a, np.where(r, v, one))
        with np.errstate(all="ignore"):
            acc[gg] = np.where(r, quotient, a * v)
    return acc


def _divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Java division: IEEE for floats; for integers truncation toward zero, MIN / -1 wraps to
    MIN, and a zero divisor is an error (ArithmeticException)."""
    if a.dtype.kind == "f":
        with np.errstate(all="ignore"):
            return a / b
    if np.any(b == 0):
        raise MergeError("product retraction divides by zero")
    with np.errstate(all="ignore"):
        return _trunc_div(a, b)


def _trunc_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Java integer division: truncate toward zero (MIN / -1 wraps to MIN)."""
    q = a // b
    fix = (q < 0) & (q * b != a)
    return (q + fix).astype(a.dtype)


def _min_max(func: AggregateFunction, arr: pa.Array, groups: Groups, use: np.ndarray) -> pa.Array:
    """Nulls are skipped. Doubles follow Java's ``Double.compare``: NaN is the largest."""
    t = arr.type
    present = groups.count_where(use) > 0
    view = _int_view(arr)
    if view is not None or pa.types.is_floating(t):
        x = view if view is not None else arr.fill_null(0).to_numpy(zero_copy_only=False)
        if x.dtype.kind == "f":
            if func is AggregateFunction.MAX:  # np.maximum propagates NaN: NaN wins, as in Java
                res = groups.reduce(np.maximum, np.where(use, x, -np.inf).astype(x.dtype))
            else:  # np.fmin skips NaN unless the group has nothing else
                res = groups.reduce(np.fmin, np.where(use, x, np.nan).astype(x.dtype))
        else:
            info = np.iinfo(x.dtype)
            fill = info.min if func is AggregateFunction.MAX else info.max
            ufunc = np.maximum if func is AggregateFunction.MAX else np.minimum
            res = groups.reduce(ufunc, np.where(use, x, fill).astype(x.dtype, copy=False))
        out = _from_numpy(res, present, pa.from_numpy_dtype(res.dtype))
        return out if out.type == t else out.view(t)
    return _hash_agg(arr, groups, use, "max" if func is AggregateFunction.MAX else "min")


def _int_view(arr: pa.Array) -> np.ndarray | None:
    t = arr.type
    if pa.types.is_integer(t):
        return arr.fill_null(0).to_numpy(zero_copy_only=False)
    width = {32: pa.int32(), 64: pa.int64()}
    if pa.types.is_temporal(t) and getattr(t, "bit_width", 0) in width:
        return arr.view(width[t.bit_width]).fill_null(0).to_numpy(zero_copy_only=False)
    return None


def _bool(func: AggregateFunction, arr: pa.Array, groups: Groups, use: np.ndarray) -> pa.Array:
    if not pa.types.is_boolean(arr.type):
        raise MergeError(f"{func.value} needs a BOOLEAN column, got {arr.type}")
    x = arr.fill_null(False).to_numpy(zero_copy_only=False)
    present = groups.count_where(use) > 0
    if func is AggregateFunction.BOOL_AND:
        res = groups.reduce(np.logical_and, np.where(use, x, True))
    else:
        res = groups.reduce(np.logical_or, np.where(use, x, False))
    return _from_numpy(res, present, pa.bool_())


def _listagg(arr: pa.Array, groups: Groups, use: np.ndarray, delimiter: str) -> pa.Array:
    """FieldListaggAgg: non-null strings joined with the delimiter, in merge order."""
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        raise MergeError(f"listagg needs a STRING column, got {arr.type}")
    lists = _hash_agg(arr, groups, use, "list")
    return pc.binary_join(lists, delimiter).cast(arr.type)


def _hash_agg(arr: pa.Array, groups: Groups, use: np.ndarray, how: str) -> pa.Array:
    """Arrow hash aggregation of ``arr[use]`` by group, scattered back to one slot per group
    (null where a group has no rows). Single-threaded so ``list`` keeps row order."""
    rows = pa.array(use)
    sub = pa.table({"g": pa.array(groups.gid).filter(rows), "v": arr.filter(rows)})
    res = sub.group_by("g", use_threads=False).aggregate([("v", how)])
    slot = np.full(groups.count, -1, dtype=np.int64)
    slot[res.column("g").to_numpy()] = np.arange(res.num_rows)
    col = res.column(f"v_{how}")
    return take_or_null(col.combine_chunks() if col.num_chunks != 1 else col.chunk(0), slot)
