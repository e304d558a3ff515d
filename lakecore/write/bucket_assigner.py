"""Dynamic bucket assignment (``bucket = -1``), pure and columnar: Paimon's ``PartitionIndex``
and ``HashBucketAssigner`` rules over numpy arrays.

A partition's index is every key hash it holds and the bucket holding it (one sorted array of
hashes and a parallel array of buckets: a lookup is ``np.searchsorted``, not a dict of millions
of ints) plus each bucket's row count (the number of hashes in its HASH index file).

Paimon's rules, as ``assign`` applies them to a batch of key hashes:

- a key already in the partition keeps its bucket (whichever assigner owns that bucket);
- a new key goes to this assigner's first non-full bucket (row count < ``target_row_num``,
  ascending bucket id), which fills up one key at a time;
- when none is left, a new bucket: the smallest id ``b`` not yet used with
  ``b % num_assigners == assign_id % num_assigners`` (Java ``isMyBucket``), below
  ``dynamic-bucket.max-buckets`` (-1: below 32768);
- when max-buckets forbids a new bucket, the key goes to one of this assigner's buckets beyond
  the target. Paimon picks one at random; lakecore picks ``|hash| mod n`` among them, so every
  run assigns the same way.

Several assigners (Spark tasks) assign one partition without talking to each other because
each creates only its own bucket ids and ``compute_assigner`` (Java
``BucketAssigner.computeAssigner``) sends every key to exactly one of them. Within a batch,
new keys are assigned in the order they first appear.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from lakecore.errors import OptionError
from lakecore.options.registry import DYNAMIC_BUCKET_MAX_BUCKETS, DYNAMIC_BUCKET_TARGET_ROW_NUM

MAX_DYNAMIC_BUCKETS = 32768  # Java Short.MAX_VALUE + 1: bucket ids are below it


def compute_assigner(partition_hash: int, key_hashes: np.ndarray, num_channels: int,
                     num_assigners: int) -> np.ndarray:
    """Java ``BucketAssigner.computeAssigner`` for every key hash (int32 in, int32 out):
    ``(|partitionHash % channels| + |keyHash % assigners|) % channels``, Java remainders."""
    if num_channels <= 0 or num_assigners <= 0:
        raise OptionError("dynamic-bucket.assigner-parallelism",
                          "the number of assigner channels and assigners must be positive")
    start = abs(int(np.fmod(np.int64(partition_hash), num_channels)))
    keys = np.abs(np.fmod(np.asarray(key_hashes, dtype=np.int64), num_assigners))
    return ((start + keys) % num_channels).astype(np.int32)


def num_assigners_for(num_channels: int, initial_buckets: int | None) -> int:
    """How many assigners share a partition: ``dynamic-bucket.initial-buckets`` when set (at
    most the channels), else one per channel (Java's ``min(initialBuckets, tasks)``)."""
    if initial_buckets is None:
        return num_channels
    return max(1, min(initial_buckets, num_channels))


class PartitionIndex:
    """Every key hash of one partition and its bucket; each bucket's row count.

    ``hashes`` (int32, sorted ascending, unique) and ``hash_buckets`` (the bucket of each)
    are parallel arrays. The index ``assign`` returns holds its new hashes beside the old
    arrays until they are first read, so the O(partition) merge runs where it is needed (a
    writer's HASH index files are written on a worker thread while its data files encode).
    """

    __slots__ = ("_hashes", "_buckets", "_pending", "row_counts")

    def __init__(self, hashes: np.ndarray, hash_buckets: np.ndarray,
                 row_counts: Mapping[int, int],
                 pending: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> None:
        self._hashes, self._buckets = hashes, hash_buckets
        self._pending = pending  # (insertion points, sorted new hashes, their buckets)
        self.row_counts: Mapping[int, int] = row_counts  # bucket -> rows in its HASH index

    def _settle(self) -> None:
        pending, self._pending = self._pending, None
        if pending is not None:
            self._hashes, self._buckets = _merge_sorted(self._hashes, self._buckets, *pending)

    @property
    def hashes(self) -> np.ndarray:
        self._settle()
        return self._hashes

    @property
    def hash_buckets(self) -> np.ndarray:
        self._settle()
        return self._buckets

    @staticmethod
    def empty() -> PartitionIndex:
        return PartitionIndex(np.zeros(0, np.int32), np.zeros(0, np.int32), {})

    @staticmethod
    def of(per_bucket: Mapping[int, np.ndarray],
           row_counts: Mapping[int, int] | None = None) -> PartitionIndex:
        """From each bucket's hashes (a HASH index file each); row counts default to the
        number of distinct hashes. A hash found in two buckets keeps the lower bucket."""
        buckets = sorted(per_bucket)
        if not buckets:
            return PartitionIndex(np.zeros(0, np.int32), np.zeros(0, np.int32),
                                  dict(row_counts or {}))
        counts = dict(row_counts) if row_counts is not None else {
            b: int(np.unique(np.asarray(per_bucket[b])).size) for b in buckets}
        if len(buckets) == 1:  # one bucket (the usual partition): its file is the index
            only = np.asarray(per_bucket[buckets[0]], np.int32)
            if only.size < 2 or bool(np.all(only[1:] > only[:-1])):  # sorted, unique
                return PartitionIndex(only, np.full(only.size, buckets[0], np.int32), counts)
        hashes = np.concatenate([np.asarray(per_bucket[b], np.int32) for b in buckets])
        owners = np.concatenate([np.full(len(per_bucket[b]), b, np.int32) for b in buckets])
        # sort by (hash, bucket) in one int64 key; the first of equal hashes: lowest bucket.
        # Each file is sorted already (lakecore's and pypaimon's), so the stable sort (timsort)
        # only merges the buckets' runs; one sorted bucket needs no sort at all.
        packed = (hashes.astype(np.int64) << 16) | owners.astype(np.int64)
        if packed.size > 1 and bool(np.any(packed[1:] < packed[:-1])):
            order = np.argsort(packed, kind="stable")
            hashes, owners = hashes[order], owners[order]
        first = np.empty(hashes.size, bool)
        first[:1] = True
        np.not_equal(hashes[1:], hashes[:-1], out=first[1:])
        return PartitionIndex(hashes[first], owners[first], counts)

    def lookup(self, key_hashes: np.ndarray) -> np.ndarray:
        """The bucket of each hash, -1 where the partition does not hold it."""
        key_hashes = np.asarray(key_hashes, np.int32)
        order = _stable_order(key_hashes)
        out = np.empty(key_hashes.size, np.int32)
        out[order] = self.lookup_sorted(key_hashes[order])
        return out

    def lookup_sorted(self, sorted_hashes: np.ndarray) -> np.ndarray:
        """``lookup`` of hashes sorted ascending: the binary searches walk the index in
        order (several times faster than random probes of a large index)."""
        return self._probe(sorted_hashes)[0]

    def _probe(self, sorted_hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each sorted hash's bucket (-1: absent) and its position in ``hashes`` (where an
        absent one would be inserted)."""
        if self.hashes.size == 0:
            return (np.full(sorted_hashes.size, -1, np.int32),
                    np.zeros(sorted_hashes.size, np.intp))
        pos = np.searchsorted(self.hashes, sorted_hashes)
        pos_c = np.minimum(pos, self.hashes.size - 1)
        found = self.hashes[pos_c] == sorted_hashes
        return np.where(found, self.hash_buckets[pos_c], -1).astype(np.int32), pos

    def bucket_hashes(self, bucket: int) -> np.ndarray:
        """The sorted hashes of one bucket."""
        if list(self.row_counts) == [bucket]:  # the partition's only bucket
            return self.hashes
        return self.hashes[self.hash_buckets == bucket]

    @property
    def buckets(self) -> list[int]:
        return sorted(self.row_counts)

    @property
    def max_bucket(self) -> int:
        return max(self.row_counts, default=-1)


@dataclass(frozen=True)
class Assignment:
    """``assign``'s result: each row's bucket, the updated index, and the buckets that
    gained keys (their HASH index files must be rewritten)."""

    buckets: np.ndarray  # int32, one per input row
    index: PartitionIndex
    touched: frozenset[int]


def assign(index: PartitionIndex, key_hashes: np.ndarray, *, target_row_num: int,
           max_buckets: int = -1, num_assigners: int = 1, assign_id: int = 0) -> Assignment:
    """The bucket of every key hash of a batch of one partition (see the module docstring)."""
    if target_row_num < 1:
        raise OptionError(DYNAMIC_BUCKET_TARGET_ROW_NUM.key, f"must be >= 1, got {target_row_num}")
    if max_buckets != -1 and not 1 <= max_buckets <= MAX_DYNAMIC_BUCKETS:
        raise OptionError(DYNAMIC_BUCKET_MAX_BUCKETS.key,
                          f"must be -1 or between 1 and {MAX_DYNAMIC_BUCKETS}, got {max_buckets}")
    key_hashes = np.asarray(key_hashes, np.int32)
    # one stable sort of the batch serves the lookup, the distinct new hashes (sorted, each
    # with the row where it first appears: the first of its run in stable order) and the
    # merge into the index
    row_order = _stable_order(key_hashes)
    sorted_hashes = key_hashes[row_order]
    known, positions = index._probe(sorted_hashes)
    out = np.empty(key_hashes.size, np.int32)
    out[row_order] = known
    new_sorted = known < 0
    if not new_sorted.any():
        return Assignment(out, index, frozenset())
    new_keys, new_rows = sorted_hashes[new_sorted], row_order[new_sorted]
    starts = np.empty(new_keys.size, bool)
    starts[0] = True
    np.not_equal(new_keys[1:], new_keys[:-1], out=starts[1:])
    uniq, first = new_keys[starts], new_rows[starts]
    at = positions[new_sorted][starts]  # where each distinct new hash enters the index
    group = np.cumsum(starts) - 1  # each new row's index into uniq
    n = uniq.size
    mine = [b for b in index.buckets if b % num_assigners == assign_id % num_assigners]
    counts = dict(index.row_counts)
    capacity = np.array([max(0, target_row_num - counts[b]) for b in mine], np.int64)
    room = capacity[capacity > 0]
    if room.size and room[0] >= n:
        # every new hash fits the first bucket with room: the order they fill it in cannot
        # change anything, so the first-appearance sort is skipped
        order = np.arange(n)
    else:
        order = _stable_order(first)  # distinct new hashes in first-appearance order
    new_hashes = uniq[order]
    chosen = np.empty(n, np.int32)
    # 1. fill this assigner's non-full buckets, ascending id
    fill = _repeat_upto(np.array(mine, np.int32), capacity, n)
    chosen[:fill.size] = fill
    done = fill.size
    # 2. new buckets of this assigner, each up to the target
    if done < n:
        limit = MAX_DYNAMIC_BUCKETS if max_buckets == -1 else max_buckets
        used = set(counts)
        start = assign_id % num_assigners
        wanted = -(-(n - done) // target_row_num)
        fresh = [b for b in range(start, limit, num_assigners) if b not in used][:wanted]
        take = _repeat_upto(np.array(fresh, np.int32),
                            np.full(len(fresh), target_row_num, np.int64), n - done)
        chosen[done:done + take.size] = take
        done += take.size
        mine = mine + fresh
    # 3. no bucket left under max-buckets: spread over this assigner's buckets
    if done < n:
        if not mine:
            raise OptionError(
                DYNAMIC_BUCKET_MAX_BUCKETS.key,
                f"assigner {assign_id} of {num_assigners} owns no bucket below "
                f"{max_buckets}; raise dynamic-bucket.max-buckets or lower the number of "
                "assigners (dynamic-bucket.initial-buckets / assigner-parallelism)")
        pool = np.array(sorted(mine), np.int32)
        rest = new_hashes[done:].astype(np.int64)
        chosen[done:] = pool[np.abs(rest) % pool.size]
    # per input row: the bucket of its distinct hash (uniq order)
    by_uniq = np.empty(n, np.int32)
    by_uniq[order] = chosen
    out[new_rows] = by_uniq[group]
    added, per_bucket = np.unique(chosen, return_counts=True)
    for b, c in zip(added.tolist(), per_bucket.tolist()):
        counts[b] = counts.get(b, 0) + c
    # merged into the sorted index (O(partition + batch)) when the new index is first read
    updated = PartitionIndex(index.hashes, index.hash_buckets, counts, (at, uniq, by_uniq))
    return Assignment(out, updated, frozenset(added.tolist()))


def _merge_sorted(hashes: np.ndarray, buckets: np.ndarray, at: np.ndarray,
                  new_hashes: np.ndarray, new_buckets: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """``np.insert`` of the sorted ``new_hashes`` (absent from ``hashes``) at their
    insertion points ``at`` (ascending), into both parallel arrays, in one pass each."""
    total = hashes.size + new_hashes.size
    dest = at + np.arange(new_hashes.size)  # each new hash's place in the merged array
    old = np.ones(total, bool)
    old[dest] = False
    out_h = np.empty(total, np.int32)
    out_b = np.empty(total, np.int32)
    out_h[dest], out_b[dest] = new_hashes, new_buckets
    out_h[old], out_b[old] = hashes, buckets
    return out_h, out_b


def _repeat_upto(values: np.ndarray, counts: np.ndarray, limit: int) -> np.ndarray:
    """``np.repeat(values, counts)[:limit]`` without building more than ``limit`` items (a
    bucket's room is up to ``target-row-num``, millions, for a batch of a few keys)."""
    if values.size == 0:
        return np.zeros(0, np.int32)
    room = np.minimum(counts, limit)
    cut = np.cumsum(room)
    room[1:] = np.minimum(room[1:], np.maximum(0, limit - cut[:-1]))
    room[0] = min(int(room[0]), limit)
    return np.repeat(values, room)[:limit]


def _stable_order(values: np.ndarray) -> np.ndarray:
    """``np.argsort(values, kind="stable")`` for 32-bit values (hashes, row numbers): each
    value packed above its position into one uint64 and sorted with numpy's plain (SIMD) sort,
    a few times faster than a stable argsort; the positions are read from the low bits."""
    v = np.asarray(values, np.int64)
    if v.size < 2:
        return np.arange(v.size)
    packed = (v - int(v.min())).astype(np.uint64) << np.uint64(32)
    packed |= np.arange(v.size, dtype=np.uint64)
    packed.sort()
    return (packed & np.uint64(0xFFFFFFFF)).astype(np.int64)
