"""Paimon's on-disk structures, one module each: BinaryRow, bucket hash, manifests, manifest lists,
snapshots, statistics, partition strings and the key-value data-file layout."""
