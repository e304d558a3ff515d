"""The column names Paimon reserves (its ``SpecialFields``): a user column may not take them.

They are the system columns of a primary-key data file's key-value layout (``format.kv`` builds
that layout from these names) and the audit column of Paimon's system tables.
"""

KEY_PREFIX = "_KEY_"  # key columns are stored again as _KEY_<name>
SEQUENCE_NUMBER = "_SEQUENCE_NUMBER"
VALUE_KIND = "_VALUE_KIND"
LEVEL = "_LEVEL"
ROW_ID = "_ROW_ID"
ROW_KIND_AUDIT = "rowkind"

SYSTEM_FIELD_NAMES = frozenset({SEQUENCE_NUMBER, VALUE_KIND, LEVEL, ROW_KIND_AUDIT, ROW_ID})
KV_SYSTEM_COLUMNS = frozenset({SEQUENCE_NUMBER, VALUE_KIND})
