"""Partial-update with sequence groups, for all keys at once, column by column.

The semantics are Paimon's ``PartialUpdateMergeFunction`` (``updateWithSequenceGroup``,
``retractWithSequenceGroup``) behind ``ReducerMergeFunctionWrapper``, restated as reductions
over each key's records (in merge order):

* A key with a single record is passed through untouched, whatever its kind.
* A key whose first record is a retraction (-U/-D) starts from that record's values (Paimon's
  ``initRow``); otherwise from nulls.
* A group's "current sequence" is the greatest (nulls first, fields compared in order)
  sequence of the records so far whose sequence fields are not all null; a record is
  *accepted* by the group when its sequence is not null and >= the current one, so among equal
  sequences the later record wins. A record whose group sequence is all null does nothing to
  the group.
* +I/+U, accepted: the group's sequence fields and protected fields take the record's values
  (nulls included), or its fields' aggregators ``agg``; not accepted: aggregators only,
  ``aggReversed`` (the record counts as older).
* -U/-D, accepted: sequence fields take the record's values, protected fields become null
  (or their aggregators ``retract``); not accepted: aggregators ``retract``. A -D accepted by a
  group of ``partial-update.remove-record-on-sequence-group`` resets the whole row to the -D's
  values (every group's current sequence with it) and, when it is the key's last record, the
  result is -D.
* Fields in no group take the last non-null value of the +I/+U records (retractions leave them).
* The result is -D when the key has no +I/+U or its last record removed the row, else +I.

Resets (the ``initRow`` of a leading retraction, and removing -D records) are positions where
every column restarts from one record's values. A leading retraction is duplicated in front of
itself (a reset, then the retraction itself), so both kinds of reset read the same way. Most
folds then start at each key's last reset; ``first_value`` and ``first_non_null_value`` also
look before it, since their "initialized" flag survives a reset, as in Java.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakecore.format.kv import RowKind
from lakecore.merge.aggregates import Groups, RetractionError, aggregate, take_or_null
from lakecore.merge.sort import adjacent_differs, integer_key, offset_from
from lakecore.merge.spec import RETRACTABLE, MergeSpec, SequenceGroup
from lakecore.options import AggregateFunction

# Aggregators whose fold does not depend on the order of the records (``aggReversed`` is
# ``agg``), handed to ``aggregate`` over the key's records since its last reset.
_FOLDS = frozenset({
    AggregateFunction.SUM, AggregateFunction.PRODUCT, AggregateFunction.MIN,
    AggregateFunction.MAX, AggregateFunction.BOOL_AND, AggregateFunction.BOOL_OR,
})


class GroupFieldError(Exception):
    """An aggregator inside a sequence group that cannot take a record: ``error`` as
    ``aggregate`` raises it (its row is a row of the merged table), for field ``column``."""

    def __init__(self, column: str, error: RetractionError) -> None:
        super().__init__(column, error.row, error.reason)
        self.column = column
        self.error = error


@dataclass
class GroupMerge:
    """One result per key: the kinds, and every value column merged (used where
    ``use_merged``; elsewhere the key's single record stands as it is)."""

    kinds: np.ndarray
    merged: dict[str, pa.Array]
    use_merged: np.ndarray


@dataclass
class _Expanded:
    """The key groups with each leading retraction of a multi-record key duplicated in front
    of itself: ``src`` maps rows back (None: nothing duplicated), ``init`` marks the copies."""

    groups: Groups
    src: np.ndarray | None
    init: np.ndarray

    def rows(self, x: np.ndarray) -> np.ndarray:
        return x if self.src is None else x[self.src]

    def array(self, a: pa.Array) -> pa.Array:
        return a if self.src is None else a.take(pa.array(self.src))

    def original(self, row: int) -> int:
        return row if self.src is None else int(self.src[row])


def merge_with_sequence_groups(
    columns: dict[str, pa.Array], spec: MergeSpec, groups: Groups, kinds: np.ndarray,
    retract: np.ndarray,
) -> GroupMerge:
    """Merge every key's records (``groups`` over the rows of ``columns``, the value
    columns, sorted in merge order) by ``spec``'s sequence groups."""
    single = groups.sizes == 1
    ex = _expand(groups, retract, single)
    eg = ex.groups
    m = eg.n
    live = ex.rows(~single[groups.gid])  # rows of keys that are merged
    kinds_e = ex.rows(kinds)
    retract_e = ex.rows(retract)
    insert = ~retract_e & live
    records = live & ~ex.init  # retractions that are records (not init copies)
    retraction = retract_e & records
    deletes = retraction & (kinds_e == RowKind.DELETE)

    states = [(g, *_sequence_ranks(columns, g, ex)) for g in spec.sequence_groups]
    key_start = np.zeros(m, dtype=bool)
    key_start[eg.starts] = True
    trig = _removals(states, deletes, key_start, eg)
    reset = (trig | ex.init) & live
    seg = key_start | trig
    # where, in table order, each removing -D resets the row: Java walks the fields in order
    # and retracts the group fields before that point first (only an error can show it)
    position = {name: i for i, name in enumerate(columns)}
    trig_at = np.full(m, len(position), dtype=np.int64)
    for g, ne, rank in states:
        if g.remove_on_delete:
            first = min(position.get(f, len(position)) for f in g.sequence_fields)
            hit = trig & ne & (rank >= _current(rank, seg, eg))
            trig_at[hit] = np.minimum(trig_at[hit], first)
    idx = np.arange(m, dtype=np.int64)
    last_reset = eg.last_index(reset)
    after = idx > last_reset[eg.gid]
    at_reset = np.zeros(m, dtype=bool)
    at_reset[last_reset[last_reset >= 0]] = True

    merged: dict[str, pa.Array] = {}
    grouped: set[str] = set()
    for g, ne, rank in states:
        acc = ne & (rank >= _current(rank, seg, eg))
        ev = _Events(
            reset=reset, after=after, at_reset=at_reset, idx=idx, groups=eg,
            a=insert & ne & acc & ~reset, v=insert & ne & ~acc & ~reset,
            r=retraction & ne & ~trig, accepted=acc, removing=trig & ne, trig_at=trig_at,
        )
        for name in g.sequence_fields:
            if name in columns:
                x = ex.array(columns[name])
                merged[name] = take_or_null(x, eg.last_index(reset | ev.a | (ev.r & acc)))
                grouped.add(name)
        for name in g.fields:
            if name not in columns:
                continue
            try:
                merged[name] = _group_field(name, ex.array(columns[name]), spec, ev,
                                            position[name])
            except RetractionError as e:
                e.row = ex.original(e.row)
                raise GroupFieldError(name, e) from None
            grouped.add(name)
    for name, arr in columns.items():
        if name in grouped:
            continue
        x = ex.array(arr)
        merged[name] = take_or_null(x, eg.last_index(reset | (insert & _valid(x))))

    has_add = eg.count_where(insert) > 0
    removed = trig[eg.ends - 1]
    out = np.where(removed | ~has_add, RowKind.DELETE, RowKind.INSERT).astype(np.int8)
    out = np.where(single, kinds[groups.ends - 1], out).astype(np.int8)
    return GroupMerge(kinds=out, merged=merged, use_merged=~single)


def _expand(groups: Groups, retract: np.ndarray, single: np.ndarray) -> _Expanded:
    lead = retract[groups.starts] & ~single
    n = groups.n
    if not lead.any():
        return _Expanded(groups, None, np.zeros(n, dtype=bool))
    counts = np.ones(n, dtype=np.int64)
    counts[groups.starts[lead]] = 2
    src = np.repeat(np.arange(n, dtype=np.int64), counts)
    first = np.cumsum(counts) - counts  # where each row's first copy lands
    init = np.zeros(len(src), dtype=bool)
    init[first[groups.starts[lead]]] = True
    return _Expanded(Groups(first[groups.starts], len(src)), src, init)


def _valid(arr: pa.Array) -> np.ndarray:
    if arr.null_count == 0:
        return np.ones(len(arr), dtype=bool)
    return arr.is_valid().to_numpy(zero_copy_only=False)


def _sequence_ranks(columns: dict[str, pa.Array], g: SequenceGroup, ex: _Expanded
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Per (expanded) row: whether the group's sequence is not all null, and its rank among
    the rows' sequences (0 for an all-null one, else 1.. in Paimon's order: fields in turn,
    ascending, nulls first), as int64."""
    cols = [columns[f] for f in g.sequence_fields]
    n = len(cols[0])
    ne = np.zeros(n, dtype=bool)
    for c in cols:
        ne |= _valid(c)
    if not ne.any():
        return ex.rows(ne), np.zeros(len(ex.init), dtype=np.int64)
    if len(cols) == 1:  # one integer-like field of a modest span: its values rank it
        key = integer_key(cols[0].fill_null(0)) if cols[0].type != pa.bool_() else None
        if key is not None:
            lo, hi = int(key[ne].min()), int(key[ne].max())
            if (hi - lo + 2) * (len(ex.init) + 1) < 2**62:
                rank = np.where(ne, offset_from(key, lo).view(np.int64) + 1, 0)
                return ex.rows(ne), ex.rows(rank)
    t = pa.table({str(i): c for i, c in enumerate(cols)})
    order = pc.sort_indices(
        t, sort_keys=[(str(i), "ascending", "at_start") for i in range(len(cols))]
    ).to_numpy()
    change = np.zeros(n, dtype=bool)
    for c in cols:
        change[1:] |= adjacent_differs(c.take(pa.array(order)))
    dense = np.empty(n, dtype=np.int64)
    dense[order] = np.cumsum(change)
    rank = np.where(ne, dense + 1, 0)
    return ex.rows(ne), ex.rows(rank)


def _current(rank: np.ndarray, seg: np.ndarray, groups: Groups) -> np.ndarray:
    """Per row, the group's current sequence before it: the greatest rank of the earlier rows
    of its segment (a key, restarted at every removing -D, whose own rank starts the new
    segment); 0 (all null) at a key's first row."""
    seg_id = np.cumsum(seg) - 1
    span = int(rank.max()) + 1  # ranks fit: (span + 1) * rows < 2**62 (_sequence_ranks)
    running = np.maximum.accumulate(seg_id * span + rank) - seg_id * span
    before = np.empty_like(rank)
    before[0] = 0
    before[1:] = running[:-1]
    before[groups.starts] = 0
    return before


def _removals(states: list[tuple[SequenceGroup, np.ndarray, np.ndarray]],
              deletes: np.ndarray, key_start: np.ndarray, groups: Groups) -> np.ndarray:
    """The -D records that remove the row: accepted by a group of
    ``partial-update.remove-record-on-sequence-group``. A removal resets every group's
    current sequence to the -D's, which can change whether a later -D is accepted by another
    such group; with several of them the removals are found one per key per pass, in order
    (each pass is exact up to the next removal)."""
    removing = [(ne, rank) for g, ne, rank in states if g.remove_on_delete]
    trig = np.zeros(groups.n, dtype=bool)
    if not removing or not deletes.any():
        return trig

    def candidates(seg: np.ndarray) -> np.ndarray:
        hit = np.zeros(groups.n, dtype=bool)
        for ne, rank in removing:
            hit |= ne & (rank >= _current(rank, seg, groups))
        return hit & deletes

    if len(removing) == 1:  # a removal never lowers its own group's current sequence
        return candidates(key_start)
    idx = np.arange(groups.n, dtype=np.int64)
    done = np.full(groups.count, -1, dtype=np.int64)  # each key's last removal found
    while True:
        hit = candidates(key_start | trig) & (idx > done[groups.gid])
        nxt = groups.first_index(hit)
        found = nxt >= 0
        if not found.any():
            return trig
        trig[nxt[found]] = True
        done[found] = nxt[found]


@dataclass
class _Events:
    """One group's records, by what they do to its fields (rows of the expanded table)."""

    reset: np.ndarray  # the row restarts from this record's values
    after: np.ndarray  # after the key's last reset
    at_reset: np.ndarray  # the key's last reset
    idx: np.ndarray
    groups: Groups
    a: np.ndarray  # +I/+U, accepted: agg
    v: np.ndarray  # +I/+U, older: aggReversed
    r: np.ndarray  # -U/-D (accepted or not): retract
    accepted: np.ndarray
    removing: np.ndarray  # removing -D records with this group's sequence not null
    trig_at: np.ndarray  # the table position of the field where such a record resets the row


def _group_field(name: str, x: pa.Array, spec: MergeSpec, ev: _Events,
                 position: int) -> pa.Array:
    """A protected field of a group, by its aggregator (None: the accepted record's value).
    ``position``: the field's place in the table (a removing -D retracts it first when it
    comes before the removing group's sequence field)."""
    g = ev.groups
    func = spec.partial_update_function(name)
    if func is None:  # accepted +I/+U set the value, accepted -U/-D null it
        at = g.last_index(ev.reset | ev.a | (ev.r & ev.accepted))
        return _null_where(x, at, ev.r & ev.accepted)
    if func not in RETRACTABLE and name not in spec.ignore_retract:
        refused = ev.r | (ev.removing & (position < ev.trig_at))
        if refused.any():
            row = int(np.flatnonzero(refused)[0])
            raise RetractionError(func, row, "does not support retraction")
    r = ev.r if name not in spec.ignore_retract else np.zeros_like(ev.r)
    if func is AggregateFunction.PRODUCT and r is ev.r:
        _check_divisions(x, ev, position)
    if func in _FOLDS:
        active = ev.at_reset | ((ev.a | ev.v | r) & ev.after)
        return aggregate(func, x, g, active, r)
    if func is AggregateFunction.LAST_VALUE:  # agg: the input; aggReversed: unchanged
        return _null_where(x, g.last_index(ev.reset | ev.a | r), r)
    valid = _valid(x)
    if func is AggregateFunction.LAST_NON_NULL_VALUE:
        return _last_non_null(x, valid, ev, r)
    if func is AggregateFunction.FIRST_VALUE:
        return _first_value(x, ev)
    if func is AggregateFunction.FIRST_NON_NULL_VALUE:
        return _first_non_null(x, valid, ev)
    if func is AggregateFunction.LISTAGG:
        return _listagg(x, valid, ev, spec.listagg_delimiter(name))
    raise AssertionError(f"no sequence-group fold for {func}")


def _check_divisions(x: pa.Array, ev: _Events, position: int) -> None:
    """Java divides a non-null integer product by every retraction in turn, raising on a 0,
    also where the result is discarded later: a retraction before a reset, or a removing -D,
    which retracts the product fields before its removing sequence field, then resets the
    row. (The fold after the last reset checks its own divisions.)"""
    if not pa.types.is_integer(x.type):
        return
    valid = _valid(x)
    rows = (ev.r | (ev.removing & (position < ev.trig_at))) & valid
    if not rows.any():
        return
    zero = rows & (x.fill_null(1).to_numpy(zero_copy_only=False) == 0)
    if not zero.any():
        return
    # the product before the -D: the last reset's value or a later non-null input
    prior = _prior(ev.reset | ((ev.a | ev.v) & valid), ev.groups)
    hit = zero & (prior >= 0) & valid[np.maximum(prior, 0)]
    if hit.any():
        raise RetractionError(AggregateFunction.PRODUCT, int(np.flatnonzero(hit)[0]),
                              "divides by zero", retraction=False)


def _null_where(x: pa.Array, at: np.ndarray, null_rows: np.ndarray) -> pa.Array:
    """``x[at]`` per key, null where ``at`` is -1 or a row of ``null_rows``."""
    at = np.where((at >= 0) & null_rows[np.maximum(at, 0)], -1, at)
    return take_or_null(x, at)


def _last_non_null(x: pa.Array, valid: np.ndarray, ev: _Events, r: np.ndarray) -> pa.Array:
    """agg: a non-null input replaces; retract: a non-null input nulls; aggReversed (an older
    record): fills the value only while it is null. So: the last reset or non-null agg /
    retract decides, and if that leaves null, the first older non-null record after it."""
    g = ev.groups
    t = g.last_index(ev.reset | ((ev.a | r) & valid))
    value = np.where((t >= 0) & ~r[np.maximum(t, 0)] & valid[np.maximum(t, 0)], t, -1)
    fill = g.first_index(ev.v & valid & (ev.idx > t[g.gid]))
    return take_or_null(x, np.where(value >= 0, value, fill))


def _prior(mask: np.ndarray, g: Groups) -> np.ndarray:
    """Per row, the last earlier row of its key where ``mask`` holds, or -1."""
    running = np.maximum.accumulate(np.where(mask, np.arange(g.n, dtype=np.int64), -1))
    prior = np.empty(g.n, dtype=np.int64)
    prior[0] = -1
    prior[1:] = running[:-1]
    prior[prior < g.starts[g.gid]] = -1
    return prior


def _first_value(x: pa.Array, ev: _Events) -> pa.Array:
    """FieldFirstValueAgg: the first agg / aggReversed of the key initializes it (agg takes
    its input, aggReversed keeps the value); after that aggReversed (an older record) takes
    its input and agg does nothing. A reset sets the value but not the "initialized" flag."""
    g = ev.groups
    e0 = g.first_index(ev.a | ev.v)
    started = e0 >= 0
    later = g.last_index((ev.v | ev.reset) & started[g.gid] & (ev.idx > e0[g.gid]))
    e0c = np.maximum(e0, 0)
    before = _prior(ev.reset, g)[e0c]
    at_start = np.where(ev.a[e0c], e0c, before)
    at = np.where(~started, g.last_index(ev.reset), np.where(later >= 0, later, at_start))
    return take_or_null(x, at)


def _first_non_null(x: pa.Array, valid: np.ndarray, ev: _Events) -> pa.Array:
    """FieldFirstNonNullValueAgg: initialized by an agg of a non-null input (which it takes)
    or by an aggReversed while the value is not null (which keeps it); before that an
    aggReversed sets the value (the value being null), after it every aggReversed does, even
    to null; agg does nothing after it. Resets set the value, not the flag."""
    g = ev.groups
    setting = ev.v | ev.reset
    prior = _prior(setting, g)
    prior_valid = (prior >= 0) & valid[np.maximum(prior, 0)]
    p = g.first_index((ev.a & valid) | (ev.v & prior_valid))
    started = p >= 0
    later = g.last_index(setting & started[g.gid] & (ev.idx > p[g.gid]))
    pc_ = np.maximum(p, 0)
    at_start = np.where(ev.a[pc_], pc_, prior[pc_])
    at = np.where(~started, g.last_index(setting), np.where(later >= 0, later, at_start))
    return take_or_null(x, at)


def _listagg(x: pa.Array, valid: np.ndarray, ev: _Events, delimiter: str) -> pa.Array:
    """FieldListaggAgg from the last reset: agg appends, aggReversed (an older record)
    prepends; empty strings add nothing (the result is "" only when nothing else came)."""
    g = ev.groups
    sel = ev.at_reset | ((ev.a | ev.v) & ev.after)
    present = g.count_where(sel & valid) > 0
    rows = np.flatnonzero(sel & valid)
    if len(rows) == 0:
        return pa.nulls(g.count, x.type)
    # older records first, latest-older first; then the reset's value; then newer in order
    cls = np.where(ev.v[rows], 0, np.where(ev.at_reset[rows], 1, 2))
    signed = np.where(ev.v[rows], -rows, rows)
    rows = rows[np.lexsort((signed, cls, g.gid[rows]))]
    values = x.take(pa.array(rows))
    keep = pc.greater(pc.binary_length(values), 0).to_numpy(zero_copy_only=False)
    sub = pa.table({"g": pa.array(g.gid[rows][keep]), "v": values.filter(pa.array(keep))})
    res = sub.group_by("g", use_threads=False).aggregate([("v", "list")])
    joined = pc.binary_join(res.column("v_list"), delimiter).cast(x.type).combine_chunks()
    slot = np.full(g.count, -1, dtype=np.int64)
    slot[res.column("g").to_numpy()] = np.arange(res.num_rows)
    out = take_or_null(joined, slot)
    empty = pa.array(present & (slot < 0))
    return pc.if_else(empty, pa.scalar("", x.type), out)
