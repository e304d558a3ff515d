"""lakecore: an LSM lake table library that writes Apache Paimon's on-disk format."""
