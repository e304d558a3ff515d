"""Where a table's files live and how they are reached: ``FileIO``, the path factory (every
path of a table), the snapshot manager, manifest I/O, reading tags and Paimon consumers,
lakecore's own bookkeeping under ``_lakecore/`` (commit-user markers, expired-partition
records), and ``FileStore``, the context every operation takes."""
