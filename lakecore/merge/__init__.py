"""The merge tree's merge functions: sort KV records and merge each key's records into one,
as Paimon's merge engines do, with columnar (pyarrow / numpy) code only."""

from lakecore.merge.functions import merge_sorted
from lakecore.merge.sort import group_starts, sort_kv, sort_permutation
from lakecore.merge.spec import MergeSpec
from lakecore.options import AggregateFunction, MergeEngine

__all__ = [
    "AggregateFunction",
    "MergeEngine",
    "MergeSpec",
    "group_starts",
    "merge_sorted",
    "sort_kv",
    "sort_permutation",
]
