"""Table options: Paimon's option keys (``registry``), their text rules (``parse``), the
cross-option checks (``checks``) and ``CoreOptions``, the typed view every operation reads."""

from lakecore.options.core import CoreOptions
from lakecore.options.parse import StatsMode
from lakecore.options.registry import (
    OPTIONS,
    AggregateFunction,
    ChangelogProducer,
    ConfigOption,
    MergeEngine,
    PartitionExpirationStrategy,
)

__all__ = [
    "OPTIONS", "AggregateFunction", "ChangelogProducer", "ConfigOption", "CoreOptions",
    "MergeEngine", "PartitionExpirationStrategy", "StatsMode",
]
