"""Writing rows: routing to (partition, bucket), merge-tree and append-only writers, and the
write builders users start from."""
