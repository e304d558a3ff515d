"""Table options: Paimon's option keys (``registry``), their text rules (``parse``), the typed
accessors (``view``), the cross-option checks (``checks``) and ``CoreOptions`` (``core``), the
validated view every operation reads."""

from lakecore.options.core import (
    OPTIONS,
    AggregateFunction,
    ChangelogProducer,
    ConfigOption,
    CoreOptions,
    MergeEngine,
    PartitionExpirationStrategy,
    StatsMode,
)

__all__ = [
    "OPTIONS",
    "AggregateFunction",
    "ChangelogProducer",
    "ConfigOption",
    "CoreOptions",
    "MergeEngine",
    "PartitionExpirationStrategy",
    "StatsMode",
]
