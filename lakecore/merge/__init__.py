"""The merge tree's merge functions: sort KV records and merge each key's records into one,
as Paimon's merge engines do, with columnar (pyarrow / numpy) code only."""

from lakecore.merge.functions import merge_sorted
from lakecore.merge.sort import group_starts, sort_kv, sort_permutation
from lakecore.merge.spec import (
    KEY_PREFIX,
    SEQUENCE_NUMBER,
    VALUE_KIND,
    AggregateFunction,
    MergeEngine,
    MergeSpec,
    RowKind,
)

__all__ = [
    "KEY_PREFIX",
    "SEQUENCE_NUMBER",
    "VALUE_KIND",
    "AggregateFunction",
    "MergeEngine",
    "MergeSpec",
    "RowKind",
    "group_starts",
    "merge_sorted",
    "sort_kv",
    "sort_permutation",
]
