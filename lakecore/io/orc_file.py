"""Reading ORC data files (Paimon's default format before 1.0) with pyarrow, stripe by stripe,
so memory is bounded by a stripe and ``chunk_rows``, not by the file."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
import pyarrow.orc as orc

from lakecore.errors import CorruptFileError
from lakecore.store.file_io import FileIO


def iter_orc_file(file_io: FileIO, path: str, columns: Sequence[str],
                  chunk_rows: int | None) -> Iterator[pa.Table]:
    """Chunks of at most ``chunk_rows`` rows (None: the whole file as one chunk) holding
    ``columns`` that are in the file, in that order (absent ones are left for the caller to
    fill)."""
    try:
        with file_io.open_input_file(path) as src:
            of = orc.ORCFile(src)
            have = set(of.schema.names)
            cols = [c for c in columns if c in have]
            if chunk_rows is None or of.nstripes == 0:
                yield of.read(columns=cols).select(cols)
                return
            for i in range(of.nstripes):
                stripe = pa.Table.from_batches([of.read_stripe(i, columns=cols)]).select(cols)
                for start in range(0, stripe.num_rows, chunk_rows):
                    yield stripe.slice(start, chunk_rows)
    except (OSError, pa.ArrowException) as e:
        raise CorruptFileError(path, f"cannot read ORC data file: {e}") from e
