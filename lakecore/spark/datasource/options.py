"""The data source's options, parsed once.

Spark lowercases every ``.option(key, value)`` key before the data source sees it, so keys
are matched case-insensitively. Four families share the map:

* **catalog options** (``warehouse``, ``lock.*``, ``s3.*``, ``catalog-key``,
  ``commit.protocol``; ``lakecore.catalog.is_catalog_option``), with the Spark conf
  ``spark.lakecore.warehouse`` / ``spark.lakecore.<catalog option>`` as fallbacks (captured
  by ``lakecore.spark.register``);
* **the table**: the ``path`` option, i.e. ``load("db.t")`` / ``save("db.t")``;
* **dynamic table options** (any key of ``lakecore.options.OPTIONS``: ``scan.snapshot-id``,
  ``scan.tag-name``, ``scan.timestamp-millis``, ``incremental-between``,
  ``dynamic-partition-overwrite``, ...), applied to the table with ``table.copy``;
* **the data source's own**: ``columns`` (read projection, comma-separated),
  ``commit.user`` / ``commit.identifier`` (an idempotent batch write), ``overwrite.partition``
  (``"dt=2026-01-02,hr=3"``: a static partition overwrite), and the streaming keys
  (``STREAM_KEYS``; ``raw`` keeps every key for the streaming modules to parse their own).

Any other key, or a malformed value, is an ``OptionError`` naming the key.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from lakecore.catalog import FileSystemCatalog, is_catalog_option
from lakecore.errors import OptionError
from lakecore.options.core import _parse
from lakecore.options.registry import resolve_key, unknown_key_message
from lakecore.spark.table_ref import normalize_warehouse, open_catalog
from lakecore.table import FileStoreTable

CONF_PREFIX = "spark.lakecore."
WAREHOUSE = "warehouse"
PATH = "path"
COLUMNS = "columns"
COMMIT_USER = "commit.user"
COMMIT_IDENTIFIER = "commit.identifier"
OVERWRITE_PARTITION = "overwrite.partition"
OWN_KEYS = frozenset({WAREHOUSE, PATH, COLUMNS, COMMIT_USER, COMMIT_IDENTIFIER,
                      OVERWRITE_PARTITION})
# Keys the streaming reader/writer parse themselves from ``raw`` (Paimon's names).
STREAM_KEYS = frozenset({"consumer-id", "consumer.expiration-time", "consumer.mode",
                         "read.changelog",
                         "consumer.ignore-progress", "scan.mode", "checkpointlocation",
                         "read.stream.maxfilespertrigger", "read.stream.maxrowspertrigger",
                         "read.stream.minrowspertrigger", "read.stream.maxtriggerdelayms"})
STREAM_KEY_PREFIXES = ("stream.", "streaming.")


READ_CHANGELOG = "read.changelog"


def reads_changelog(opts: SourceOptions) -> bool:
    """Paimon Spark's ``read.changelog``: a stream's rows carry their row kind (``rowkind``,
    first), as an incremental read's do."""
    return opts.raw.get(READ_CHANGELOG, "false").strip().lower() == "true"


def _pairs(m: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(m.items()))


def parse_partition_spec(key: str, text: str) -> tuple[tuple[str, str], ...]:
    """``"dt=2026-01-02,hr=3"`` -> ``(("dt", "2026-01-02"), ("hr", "3"))``."""
    out: dict[str, str] = {}
    for part in text.split(","):
        name, eq, value = part.partition("=")
        if not eq or not name.strip():
            raise OptionError(key, f"invalid value {text!r}: expected 'col=value[,col=value]'")
        if name.strip() in out:
            raise OptionError(key, f"invalid value {text!r}: column {name.strip()!r} twice")
        out[name.strip()] = value.strip()
    return tuple(out.items())


@dataclass(frozen=True)
class SourceOptions:
    """Every option of one ``spark.read`` / ``df.write`` / stream, validated. Picklable
    (tuples, no mappings), so readers and writers ship it to the executors."""

    warehouse: str
    identifier: str
    catalog_pairs: tuple[tuple[str, str], ...] = ()
    table_pairs: tuple[tuple[str, str], ...] = ()
    columns: tuple[str, ...] | None = None
    commit_user: str | None = None
    commit_identifier: int | None = None
    overwrite_partition: tuple[tuple[str, str], ...] | None = None
    raw_pairs: tuple[tuple[str, str], ...] = ()

    @property
    def catalog_options(self) -> dict[str, str]:
        """Catalog options (lock, S3, ...) without ``warehouse``."""
        return dict(self.catalog_pairs)

    @property
    def table_options(self) -> dict[str, str]:
        """Dynamic table options for this read or write (``table.copy``)."""
        return dict(self.table_pairs)

    @property
    def raw(self) -> dict[str, str]:
        """Every option as given (keys lowercased), conf fallbacks excluded."""
        return dict(self.raw_pairs)

    @staticmethod
    def parse(
        options: Mapping[str, Any],
        conf: Mapping[str, str] | None = None,
        extra_keys: Collection[str] = (),
    ) -> SourceOptions:
        """Validate the data source's ``options`` (and ``spark.lakecore.*`` ``conf``).
        ``extra_keys`` are accepted as they are (left in ``raw``)."""
        raw = {str(k).lower(): str(v) for k, v in options.items()}
        fallback = {k[len(CONF_PREFIX):].lower(): str(v) for k, v in (conf or {}).items()
                    if k.startswith(CONF_PREFIX)}
        catalog: dict[str, str] = {}
        table: dict[str, str] = {}
        for key, value in fallback.items():
            if is_catalog_option(key):
                catalog[key] = value
        extra = {k.lower() for k in extra_keys}
        for key, value in raw.items():
            if key in OWN_KEYS or key in extra or key in STREAM_KEYS:
                continue
            if key.startswith(STREAM_KEY_PREFIXES):
                continue
            if is_catalog_option(key):
                catalog[key] = value
                continue
            option, _column = resolve_key(key)
            if option is None:
                raise OptionError(key, unknown_key_message(key))
            _parse(option, key, value, strict=True)
            table[key] = value
        warehouse = raw.get(WAREHOUSE) or fallback.get(WAREHOUSE)
        if not warehouse:
            raise OptionError(WAREHOUSE, "required: .option('warehouse', ...) or the Spark conf "
                                         "'spark.lakecore.warehouse'")
        identifier = raw.get(PATH, "").strip()
        if not identifier:
            raise OptionError(PATH, "the table is required: load('db.t') / save('db.t')")
        return SourceOptions(
            warehouse=normalize_warehouse(warehouse),
            identifier=identifier,
            catalog_pairs=_pairs(catalog),
            table_pairs=_pairs(table),
            columns=_columns(raw.get(COLUMNS)),
            commit_user=_commit_user(raw),
            commit_identifier=_commit_identifier(raw),
            overwrite_partition=(parse_partition_spec(OVERWRITE_PARTITION,
                                                      raw[OVERWRITE_PARTITION])
                                 if raw.get(OVERWRITE_PARTITION) else None),
            raw_pairs=_pairs(raw),
        )


def _columns(text: str | None) -> tuple[str, ...] | None:
    if text is None:
        return None
    names = tuple(n.strip() for n in text.split(","))
    if not all(names):
        raise OptionError(COLUMNS, f"invalid value {text!r}: expected 'a,b,c'")
    if len(set(names)) != len(names):
        raise OptionError(COLUMNS, f"invalid value {text!r}: a column is named twice")
    return names


def _commit_user(raw: Mapping[str, str]) -> str | None:
    user = raw.get(COMMIT_USER)
    if user is not None and not user.strip():
        raise OptionError(COMMIT_USER, "must not be blank")
    if user is None and raw.get(COMMIT_IDENTIFIER) is not None:
        raise OptionError(COMMIT_IDENTIFIER, "needs 'commit.user' too (idempotence is per user)")
    return user


def _commit_identifier(raw: Mapping[str, str]) -> int | None:
    text = raw.get(COMMIT_IDENTIFIER)
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        raise OptionError(COMMIT_IDENTIFIER, f"invalid value {text!r}: expected an integer"
                          ) from None


def open_table(opts: SourceOptions) -> tuple[FileSystemCatalog, FileStoreTable]:
    """The catalog (close it when done: it may hold lock connections) and the table with the
    dynamic table options applied. Columns named by ``columns`` are checked here."""
    catalog = open_catalog(opts.warehouse, opts.catalog_options)
    try:
        table = catalog.get_table(opts.identifier)
        if opts.table_pairs:
            table = table.copy(opts.table_options)
        if opts.columns is not None:
            names = table.schema.row_type.names
            unknown = [c for c in opts.columns if c not in names]
            if unknown:
                raise OptionError(COLUMNS, f"unknown column(s) {unknown} (table columns: "
                                           f"{names})")
    except BaseException:
        catalog.close()
        raise
    return catalog, table
