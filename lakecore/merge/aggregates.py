"""Paimon's field aggregators, evaluated for all key groups at once.

Every aggregator is a fold over the records of a group in merge order: ``agg`` for +I/+U and
``retract`` for -U/-D (Paimon's ``FieldAggregator``). Here each fold is rewritten as
reductions over group boundaries (``np.*.reduceat``), "pick one row per group" index
arithmetic, or ``pyarrow`` hash aggregation, so no Python code runs per row. The only
sequential fold left, a ``product`` that also divides out retractions (Java's truncating
integer division is not a reduction), loops over positions within a group, vectorized across
the groups that need it.

Integer ``sum`` and ``product`` are exact, as in Paimon 2.x (``FieldSumAgg`` /
``FieldProductAgg`` use ``Math.addExact``/``multiplyExact`` and their byte/short
equivalents): any intermediate result outside the column's type is an error, never a
wrapped value. Sums are checked on segmented prefix sums, products on the log2 magnitude of
each group (exactly, with Python integers, only for groups within a bit of the limit).

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
    """A record the aggregator cannot take: ``row`` is the first such record, ``reason`` says
    why. The merge function turns it into a MergeError that names the field and the key.
    ``retraction`` is False for errors that ignoring retractions would not cure (overflow)."""

    def __init__(self, func: AggregateFunction, row: int, reason: str,
                 retraction: bool = True) -> None:
        super().__init__(func.value, row, reason)
        self.func = func
        self.row = row
        self.reason = reason
        self.retraction = retraction


# Paimon's names of the integer types, for error messages.
_JAVA_INT = {np.dtype(np.int8): "TINYINT", np.dtype(np.int16): "SMALLINT",
             np.dtype(np.int32): "INT", np.dtype(np.int64): "BIGINT"}


def _overflow(func: AggregateFunction, row: int, dtype: np.dtype, what: str) -> RetractionError:
    name = _JAVA_INT.get(dtype, str(dtype))
    cls = "FieldSumAgg" if func is AggregateFunction.SUM else "FieldProductAgg"
    return RetractionError(func, row, f"overflows {name} ({what}; Paimon's {cls} raises "
                           "ArithmeticException rather than wrap)", retraction=False)


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
    distinct: bool = False,
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
        return _listagg(arr, groups, active & valid, delimiter, distinct)
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

    Integer sums are exact: an intermediate sum outside the type raises (``Math.addExact``).
    """
    present = groups.count_where(use) > 0
    if pa.types.is_decimal(arr.type):
        return _decimal_sum(arr, groups, use, retract, present)
    x = _numbers(arr, AggregateFunction.SUM)
    signed = np.where(retract, -x, x)
    identity = -0.0 if x.dtype.kind == "f" else 0
    v = np.where(use, signed, identity).astype(x.dtype, copy=False)
    if x.dtype.kind == "i":
        _check_sum(x, v, groups, use, retract)
    total = groups.reduce(np.add, v)
    return _from_numpy(total, present, arr.type)


def _check_sum(x: np.ndarray, v: np.ndarray, groups: Groups, use: np.ndarray,
               retract: np.ndarray) -> None:
    """Raise at the first record whose add/subtract leaves the type, in merge order.

    Every group's running sum is a global wrapped ``cumsum`` minus the group's base, which is
    exact modulo 2**bits; a step overflows when the signs say so (Hacker's Delight 2-13), and
    the first flagged step of a group is its first real overflow (all earlier sums are exact).
    """
    with np.errstate(over="ignore"):
        run = np.cumsum(v, dtype=v.dtype)
        base = np.zeros(groups.count, dtype=v.dtype)
        base[1:] = run[groups.starts[1:] - 1]
        res = run - base[groups.gid]
        prev = res - v
    add = ((prev ^ res) & (x ^ res)) < 0
    sub = ((prev ^ x) & (prev ^ res)) < 0
    bad = use & np.where(retract, sub, add)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        op = "-" if retract[row] else "+"
        raise _overflow(AggregateFunction.SUM, row, x.dtype, f"{prev[row]} {op} {x[row]}")


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
    """FieldProductAgg: null * x = x; a retraction divides (acc / x) but leaves a null
    accumulator null (FieldAggregatorTest.testFieldProductIntAgg: retract(null, 5) is null).
    Integer products are exact (``Math.multiplyExact``), integer division truncates toward
    zero, and MIN / -1 or a zero divisor raise, like Java."""
    if pa.types.is_decimal(arr.type):
        raise MergeError("product on DECIMAL columns is not supported")
    x = _numbers(arr, AggregateFunction.PRODUCT)
    present = groups.count_where(use & ~retract) > 0
    one = np.ones(1, dtype=x.dtype)[0]
    dividing = use & retract
    hit = groups.count_where(dividing) > 0 if dividing.any() else np.zeros(groups.count, bool)
    if x.dtype.kind == "i":
        _check_product(x, groups, use & ~hit[groups.gid])
    with np.errstate(over="ignore"):
        out = groups.reduce(np.multiply, np.where(use, x, one).astype(x.dtype, copy=False))
    if hit.any():
        # Groups with a division are folded in order: a product mixed with truncating
        # divisions is not a reduction.
        rows = np.flatnonzero(use & hit[groups.gid])
        acc, has = _fold_product(x, rows, retract, groups)
        out[hit] = acc[hit]
        present = np.where(hit, has, present)
    return _from_numpy(out, present, arr.type)


def _check_product(x: np.ndarray, groups: Groups, use: np.ndarray) -> None:
    """Raise for the first group (without divisions) whose running product leaves the type.

    Without divisions a running product only grows in magnitude until its first zero (after
    which it stays 0), so the largest intermediate is the product up to that zero: its log2
    decides, and groups within a bit of the limit are multiplied out exactly.
    """
    if not use.any():
        return
    bits = x.dtype.itemsize * 8 - 1
    first_zero = groups.first_index(use & (x == 0))
    cut = np.where(first_zero >= 0, first_zero, groups.n)
    counted = use & (np.arange(groups.n) < cut[groups.gid])
    mag = np.log2(np.maximum(np.abs(x.astype(np.float64)), 1.0))
    total = groups.reduce(np.add, np.where(counted, mag, 0.0))
    bad = total > bits + 0.5
    info = np.iinfo(x.dtype)
    for g in np.flatnonzero((total >= bits - 0.5) & ~bad):  # rare: near the limit only
        vals = x[groups.starts[g]:groups.ends[g]][counted[groups.starts[g]:groups.ends[g]]]
        run = np.multiply.accumulate(vals.astype(object))
        bad[g] = bool(np.any((run > int(info.max)) | (run < int(info.min))))
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        raise _overflow(AggregateFunction.PRODUCT, int(groups.starts[first]), x.dtype,
                        "the running product")


def _fold_product(
    x: np.ndarray, rows: np.ndarray, retract: np.ndarray, groups: Groups
) -> tuple[np.ndarray, np.ndarray]:
    """Sequential product/division over ``rows`` (ascending), one step per position in group,
    every step vectorized across the groups that have a row at that position. Returns the
    accumulators and whether each is non-null."""
    acc = np.zeros(groups.count, dtype=x.dtype)
    has = np.zeros(groups.count, dtype=bool)
    g = groups.gid[rows]
    rank = np.arange(len(rows)) - np.searchsorted(g, g, side="left")
    order = np.argsort(rank, kind="stable")
    bounds = np.searchsorted(rank[order], np.arange(rank.max(initial=-1) + 2))
    one = np.ones(1, dtype=x.dtype)[0]
    for k in range(len(bounds) - 1):
        at = np.sort(rows[order[bounds[k]:bounds[k + 1]]])
        gg, v, r = groups.gid[at], x[at], retract[at]
        a, h = acc[gg], has[gg]
        divide = r & h  # a retraction from a null accumulator leaves it null
        multiply = ~r & h
        if x.dtype.kind == "i":
            _check_step(x.dtype, at, a, v, divide, multiply)
        quotient = _divide(a, np.where(divide, v, one))
        with np.errstate(all="ignore"):
            acc[gg] = np.where(divide, quotient,
                               np.where(multiply, a * v, np.where(h | r, a, v)))
        has[gg] = h | ~r
    return acc, has


def _check_step(dtype: np.dtype, at: np.ndarray, a: np.ndarray, v: np.ndarray,
                divide: np.ndarray, multiply: np.ndarray) -> None:
    """Java's exact integer steps: a zero divisor, MIN / -1 and a product outside the type
    raise, at the first such record."""
    info = np.iinfo(dtype)
    zero = divide & (v == 0)
    if zero.any():
        raise RetractionError(AggregateFunction.PRODUCT, int(at[zero][0]), "divides by zero")
    bad = divide & (a == info.min) & (v == -1)
    wide = a.astype(np.int64)
    if dtype.itemsize < 8:
        p = wide * v.astype(np.int64)
        bad |= multiply & ((p > info.max) | (p < info.min))
    else:
        with np.errstate(all="ignore"):
            p = a * v
            safe = (v != 0) & ~((p == info.min) & (v == -1))
            q = _trunc_div(p, np.where(safe, v, 1))
        bad |= multiply & (((v != 0) & (q != a)) | ((a == info.min) & (v == -1)))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        op = "/" if divide[i] else "*"
        raise _overflow(AggregateFunction.PRODUCT, int(at[i]), dtype, f"{a[i]} {op} {v[i]}")


def _divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Java division: IEEE for floats; for integers truncation toward zero (the caller has
    ruled out a zero divisor and MIN / -1)."""
    if a.dtype.kind == "f":
        with np.errstate(all="ignore"):
            return a / b
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


def _listagg(arr: pa.Array, groups: Groups, use: np.ndarray, delimiter: str,
             distinct: bool = False) -> pa.Array:
    """FieldListaggAgg: the non-empty strings joined with the delimiter, in merge order. A
    null input leaves the accumulator alone, and so does an empty one (``agg``: an input of
    zero bytes returns the accumulator, an empty accumulator is replaced by the input): a
    group of empty strings only gives '', of nulls only null. ``distinct``
    (``fields.<f>.distinct``): :func:`_distinct_listagg`."""
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        raise MergeError(f"listagg needs a STRING column, got {arr.type}")
    filled = np.asarray(pc.fill_null(pc.greater(pc.binary_length(arr), 0), False)
                        .to_numpy(zero_copy_only=False), dtype=bool)
    if distinct:
        joined = _distinct_listagg(arr, groups, use & filled, delimiter)
    else:
        joined = pc.binary_join(_hash_agg(arr, groups, use & filled, "list"), delimiter)
    only_empty = (groups.count_where(use) > 0) & (groups.count_where(use & filled) == 0)
    if only_empty.any():
        joined = pc.if_else(pa.array(only_empty), pa.scalar("", joined.type), joined)
    return joined.cast(arr.type)


def _distinct_listagg(arr: pa.Array, groups: Groups, take: np.ndarray, delimiter: str
                      ) -> pa.Array:
    """FieldListaggAgg with ``distinct``, over the non-empty values ``take`` marks: the group's
    first value whole, then each later value's non-empty parts (split at the delimiter, at ' '
    when it is empty: ``splitByWholeSeparatorPreserveAllTokens``) that equal no earlier part
    of the group, each after the delimiter. Columnar: the parts of all values are flattened,
    and a part is new where it starts a run of equal (group, part) in (group, part, position)
    order."""
    rows = np.flatnonzero(take)
    if rows.size == 0:
        return pa.nulls(groups.count, pa.string())
    gid = groups.gid[rows]
    head = groups.first_index(take)
    values = arr.take(pa.array(rows)).cast(pa.string())
    parts = pc.split_pattern(values, delimiter or " ")
    parent = np.asarray(pc.list_parent_indices(parts).to_numpy(), dtype=np.int64)
    tokens = pc.list_flatten(parts)
    t = pa.table({"g": gid[parent], "tok": tokens, "seq": np.arange(len(tokens))})
    order = pc.sort_indices(t, [("g", "ascending"), ("tok", "ascending"),
                                ("seq", "ascending")]).to_numpy()
    g_sorted = t.column("g").to_numpy()[order]
    tok_sorted = tokens.take(pa.array(order))
    new_sorted = np.ones(len(order), dtype=bool)
    if len(order) > 1:
        same_tok = np.asarray(pc.equal(tok_sorted[1:], tok_sorted[:-1]).to_numpy(
            zero_copy_only=False), dtype=bool)
        new_sorted[1:] = (g_sorted[1:] != g_sorted[:-1]) | ~same_tok
    first = np.empty(len(order), dtype=bool)
    first[order] = new_sorted
    g = gid[parent]
    from_head = rows[parent] == head[g]
    nonempty = np.asarray(pc.greater(pc.binary_length(tokens), 0).to_numpy(
        zero_copy_only=False), dtype=bool)
    added = first & nonempty & ~from_head
    whole = take_or_null(values, np.searchsorted(rows, np.maximum(head, 0)))
    whole = pc.if_else(pa.array(head >= 0), whole, pa.scalar(None, pa.string()))
    if not added.any():
        return whole
    keep = pa.array(added)
    sub = pa.table({"g": pa.array(g).filter(keep), "v": tokens.filter(keep)})
    res = sub.group_by("g", use_threads=False).aggregate([("v", "list")])  # in part order
    slot = np.full(groups.count, -1, dtype=np.int64)
    slot[res.column("g").to_numpy()] = np.arange(res.num_rows)
    tail = take_or_null(pc.binary_join(res.column("v_list").combine_chunks(), delimiter), slot)
    joined = pc.binary_join_element_wise(whole, tail, delimiter)
    return pc.if_else(pa.array(slot >= 0), joined, whole)


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
