"""Where a table's files live and how they are reached: ``FileIO``, the path factory, the
snapshot manager, manifest I/O, lakecore's own bookkeeping under ``_lakecore/``, and
``FileStore``, the context every operation takes."""
