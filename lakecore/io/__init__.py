"""Data files: the rolling Parquet writer with its statistics, and the readers of data files."""
