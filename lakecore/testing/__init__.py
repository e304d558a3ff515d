"""Hooks for lakecore's own crash and concurrency tests; inert unless their env var is set."""
