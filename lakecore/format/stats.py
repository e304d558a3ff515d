"""``SimpleStats``: per-column min / max / null counts, as manifests and manifest lists store them.

Min and max are kept as serialized BinaryRow bytes (4-byte arity prefix form) so that values read
from a file are written back byte for byte; turning them into Python values needs the row type,
which is the BinaryRow codec's business, not this module's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lakecore.format.binary_row import EMPTY_ROW


@dataclass(frozen=True, slots=True)
class SimpleStats:
    """Stats of some columns of a file or manifest, in BinaryRow form.

    ``null_counts`` is ``None`` when unknown; an element is ``None`` when that column's count
    is unknown. An empty tuple means "no columns", which is how Paimon writes empty stats.
    """

    min_values: bytes
    max_values: bytes
    null_counts: tuple[int | None, ...] | None

    def to_avro(self) -> dict[str, Any]:
        """The Avro record of the three ``*_STATS`` schemas."""
        return {
            "_MIN_VALUES": self.min_values,
            "_MAX_VALUES": self.max_values,
            # A list: in a union position fastavro reads a tuple as (branch name, value).
            "_NULL_COUNTS": None if self.null_counts is None else list(self.null_counts),
        }

    @classmethod
    def from_avro(cls, record: Mapping[str, Any]) -> SimpleStats:
        """Read a stats record; a missing ``_NULL_COUNTS`` (older writers) means unknown."""
        nulls = record.get("_NULL_COUNTS")
        return cls(
            record["_MIN_VALUES"],
            record["_MAX_VALUES"],
            None if nulls is None else tuple(nulls),
        )


# Paimon's SimpleStats.EMPTY_STATS: empty min/max rows and an empty null-count array.
EMPTY_STATS = SimpleStats(EMPTY_ROW, EMPTY_ROW, ())


def simple_stats_fields() -> list[dict[str, Any]]:
    """The Avro fields of a SimpleStats record (a fresh list: fastavro may annotate schemas)."""
    return [
        {"name": "_MIN_VALUES", "type": "bytes"},
        {"name": "_MAX_VALUES", "type": "bytes"},
        {
            "name": "_NULL_COUNTS",
            "type": ["null", {"type": "array", "items": ["null", "long"]}],
            "default": None,
        },
    ]


SIMPLE_STATS_FIELDS: list[dict[str, Any]] = simple_stats_fields()


def _stats_record(name: str) -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": simple_stats_fields()}


# Record names are Paimon's (``record_`` + the field holding them): Avro readers resolve nested
# records by name, so they must match what Java and pypaimon write.
KEY_STATS_SCHEMA: dict[str, Any] = _stats_record("record_KEY_STATS")
VALUE_STATS_SCHEMA: dict[str, Any] = _stats_record("record_VALUE_STATS")
PARTITION_STATS_SCHEMA: dict[str, Any] = _stats_record("record_PARTITION_STATS")
