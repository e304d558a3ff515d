"""The single committer: ``CommitMessage`` from writers, the pure commit plan (live files,
conflict checks, entries to write) and ``FileStoreCommit`` (manifests, snapshot, publish)."""
