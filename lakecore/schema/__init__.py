"""Table schemas: Paimon's data types (``types``), ``Schema`` / ``TableSchema`` and their
validation, and the partition-time rules that read a time out of partition values."""

from lakecore.schema.schema import Schema, TableSchema, highest_field_id

__all__ = ["Schema", "TableSchema", "highest_field_id"]
