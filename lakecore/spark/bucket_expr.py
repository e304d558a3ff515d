"""Paimon's bucket of integer and date keys as a Spark SQL expression, so the common case
needs no Python pass before the shuffle (``lakecore.format.bucket`` is the reference; the
Arrow UDF in ``tasks.bucket_function`` covers every other key type).

The bucket key is a BinaryRow: an 8-byte header word (row kind 0, then one null bit per field
from bit 8), then one 8-byte slot per field (TINYINT/SMALLINT/INT/DATE zero-extended, BIGINT as
two's complement, 0 when null). Its hash is MurmurHash3-32 (seed 42) over the row's 4-byte
little-endian words, finalized with the byte length; bucket = |hash % n| (Java's ``%``).

Spark evaluates this in BIGINT arithmetic that never overflows (ANSI mode is on by default):
values stay below 2^32 and 32-bit products are built from 16-bit halves. Each mixing round is
its own projection, so expressions do not grow with the number of words.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakecore.format.binary_row import HEADER_SIZE_IN_BITS, null_bits_size
from lakecore.format.bucket import SEED
from lakecore.types import DataType, TypeRoot

MASK = 0xFFFFFFFF
_C1, _C2, _N1 = 0xCC9E2D51, 0x1B873593, 0xE6546B64
_F1, _F2 = 0x85EBCA6B, 0xC2B2AE35
# (table type) -> Spark source types that reach it by exact widening
_NATIVE: dict[TypeRoot, tuple[type[T.DataType], ...]] = {
    TypeRoot.TINYINT: (T.ByteType,),
    TypeRoot.SMALLINT: (T.ByteType, T.ShortType),
    TypeRoot.INT: (T.ByteType, T.ShortType, T.IntegerType),
    TypeRoot.BIGINT: (T.ByteType, T.ShortType, T.IntegerType, T.LongType),
    TypeRoot.DATE: (T.DateType,),
}
_SLOT_MASK = {TypeRoot.TINYINT: 0xFF, TypeRoot.SMALLINT: 0xFFFF, TypeRoot.INT: MASK,
              TypeRoot.DATE: MASK}
_MAX_NATIVE_KEYS = 8


def supports_native(source: T.StructType, names: Sequence[str],
                    types: Sequence[DataType]) -> bool:
    """Whether the key columns (as the source has them) can be bucketed in Spark SQL."""
    if not names or len(names) > _MAX_NATIVE_KEYS:
        return False
    by_name = {f.name: f.dataType for f in source.fields}
    return all(
        n in by_name and isinstance(by_name[n], _NATIVE.get(t.root, ())) and not t.is_nested
        for n, t in zip(names, types)
    )


def _mix_int(h: int, k: int) -> int:
    """One murmur round in Python, to fold the constant words of a row."""
    k = (k * _C1) & MASK
    k = ((k << 15) | (k >> 17)) & MASK
    k = (k * _C2) & MASK
    h ^= k
    h = ((h << 13) | (h >> 19)) & MASK
    return (h * 5 + _N1) & MASK


def _lit(v: int) -> Column:
    return F.lit(v).cast("bigint")


def _mul32(x: Column, c: int) -> Column:
    """(x * c) mod 2^32 for 0 <= x < 2^32, without a 64-bit overflow."""
    lo, hi = c & 0xFFFF, c >> 16
    return ((x * _lit(lo)) + F.shiftleft((x * _lit(hi)).bitwiseAND(_lit(0xFFFF)), 16)
            ).bitwiseAND(_lit(MASK))


def _rotl(x: Column, r: int) -> Column:
    return F.shiftleft(x, r).bitwiseOR(F.shiftright(x, 32 - r)).bitwiseAND(_lit(MASK))


def _mix(h: Column, k: Column) -> Column:
    k = _mul32(_rotl(_mul32(k, _C1), 15), _C2)
    return (_rotl(h.bitwiseXOR(k), 13) * _lit(5) + _lit(_N1)).bitwiseAND(_lit(MASK))


def _words(names: Sequence[str], types: Sequence[DataType], nullable: Sequence[bool]
           ) -> list[Column | int]:
    """The row's 32-bit words, constant ones as ints (the header of a row without nulls)."""
    nb_words = null_bits_size(len(names)) // 4
    header: list[Column | int] = [0] * nb_words
    for i, (name, maybe_null) in enumerate(zip(names, nullable)):
        if not maybe_null:
            continue
        bit = i + HEADER_SIZE_IN_BITS
        flag = F.when(F.col(name).isNull(), _lit(1 << (bit % 32))).otherwise(_lit(0))
        w = header[bit // 32]
        header[bit // 32] = flag if isinstance(w, int) else w.bitwiseOR(flag)
    words = list(header)
    for name, t in zip(names, types):
        if t.root is TypeRoot.DATE:
            v = F.coalesce(F.unix_date(F.col(name)).cast("bigint"), _lit(0))
        else:
            v = F.coalesce(F.col(name).cast("bigint"), _lit(0))
        if t.root is TypeRoot.BIGINT:
            words += [v.bitwiseAND(_lit(MASK)), F.shiftright(v, 32).bitwiseAND(_lit(MASK))]
        else:
            words += [v.bitwiseAND(_lit(_SLOT_MASK[t.root])), 0]
    return words


def with_native_bucket(df: DataFrame, names: Sequence[str], types: Sequence[DataType],
                       num_buckets: int, out: str) -> DataFrame:
    """``df`` plus column ``out``: Paimon's bucket of the key columns (see ``supports_native``)."""
    nullable = {f.name: f.nullable for f in df.schema.fields}
    # a NOT NULL key column's nulls are rejected by the writer anyway: no null bits needed
    words = _words(names, types, [nullable[n] and t.nullable for n, t in zip(names, types)])
    length = len(words) * 4
    tmp = f"{out}__h"
    h = SEED
    i = 0
    while i < len(words) and isinstance(words[i], int):  # constant prefix: fold in Python
        h = _mix_int(h, int(words[i]))  # type: ignore[arg-type]
        i += 1
    cur = _lit(h)
    for w in words[i:]:
        k = _lit(w) if isinstance(w, int) else w
        df = df.select("*", _mix(cur, k).alias(tmp + "x")).drop(tmp)
        df = df.withColumnRenamed(tmp + "x", tmp)
        cur = F.col(tmp)
    fin = _fmix_expr(cur, length)
    signed = F.when(fin >= _lit(1 << 31), fin - _lit(1 << 32)).otherwise(fin)
    bucket = F.abs(signed % _lit(num_buckets)).cast("int")
    return df.select("*", bucket.alias(out)).drop(tmp)


def _fmix_expr(h: Column, length: int) -> Column:
    h = h.bitwiseXOR(_lit(length))
    h = h.bitwiseXOR(F.shiftright(h, 16))
    h = _mul32(h, _F1)
    h = h.bitwiseXOR(F.shiftright(h, 13))
    h = _mul32(h, _F2)
    return h.bitwiseXOR(F.shiftright(h, 16))
