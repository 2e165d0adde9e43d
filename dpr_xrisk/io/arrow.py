"""🤗 datasets / Arrow tables as inputs: a folder written by ``Dataset.save_to_disk``, a Parquet
file, or a folder of Parquet shards, with the columns of the DPR formats.

Tables are read in record batches: a ``save_to_disk`` folder is memory-mapped by datasets (its
Arrow files are never copied into Python lists), Parquet is streamed with pyarrow, so reading a
large corpus holds one batch of rows at a time. A missing column is a one-line error naming it;
errors about one row name the table and the row (1-based, as ``path:row``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Iterator

from dpr_xrisk.errors import InputError

BATCH = 4096


def is_table(path: str | Path) -> bool:
    """A Parquet file, a ``save_to_disk`` folder, or a folder of Parquet shards."""
    p = Path(path)
    if p.is_file():
        return p.suffix.lower() == ".parquet"
    if p.is_dir():
        return (p / "state.json").exists() or (p / "dataset_dict.json").exists() or any(p.glob("*.parquet"))
    return False


def _parquet_files(p: Path) -> list[Path]:
    return [p] if p.is_file() else sorted(p.glob("*.parquet"))


def _open_saved(p: Path):
    import datasets

    if (p / "dataset_dict.json").exists():
        raise InputError("holds several splits (a DatasetDict); give the folder of one split", p)
    datasets.disable_progress_bars()
    try:
        return datasets.load_from_disk(str(p))
    except Exception as e:  # noqa: BLE001 - a damaged folder: datasets' own message
        raise InputError(f"cannot load the dataset ({type(e).__name__}: {e})", p) from None


def column_names(path: str | Path) -> list[str]:
    p = Path(path)
    if p.is_dir() and (p / "state.json").exists():
        return list(_open_saved(p).column_names)
    import pyarrow.parquet as pq

    files = _parquet_files(p)
    try:
        names = [pq.read_schema(f).names for f in files]
    except Exception as e:  # noqa: BLE001
        raise InputError(f"cannot read the Parquet schema ({e})", p) from None
    if any(n != names[0] for n in names):
        raise InputError("Parquet shards with different columns", p)
    return names[0]


def num_rows(path: str | Path) -> int:
    p = Path(path)
    if p.is_dir() and (p / "state.json").exists():
        return len(_open_saved(p))
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(f).metadata.num_rows for f in _parquet_files(p))


def require_columns(path, present: Iterable[str], needed: list[str | tuple[str, ...]]) -> dict[str, str]:
    """Map each needed column (or the first present of alternatives) to its name in the table."""
    have, out = set(present), {}
    for want in needed:
        alts = (want,) if isinstance(want, str) else want
        found = next((a for a in alts if a in have), None)
        if found is None:
            raise InputError(f"missing column {' or '.join(repr(a) for a in alts)} (columns: {', '.join(sorted(have))})", path)
        out[alts[0]] = found
    return out


def iter_rows(path: str | Path, columns: list[str]) -> Iterator[tuple[int, dict]]:
    """(1-based row number, {column: value}) for the given columns, one record batch at a time."""
    p = Path(path)
    row = 0
    if p.is_dir() and (p / "state.json").exists():
        ds = _open_saved(p).select_columns(columns)
        for batch in ds.iter(batch_size=BATCH):
            for i in range(len(batch[columns[0]])):
                row += 1
                yield row, {c: batch[c][i] for c in columns}
        return
    import pyarrow.parquet as pq

    for f in _parquet_files(p):
        try:
            for batch in pq.ParquetFile(f).iter_batches(batch_size=BATCH, columns=columns):
                for rec in batch.to_pylist():
                    row += 1
                    yield row, rec
        except (OSError, ValueError) as e:  # pyarrow's errors for damaged files
            raise InputError(f"cannot read Parquet ({e})", f) from None


def write_dataset(out: str | Path, rows: Iterable[dict], overwrite: bool = False) -> int:
    """Write rows (dicts with the same keys) as a ``save_to_disk`` folder; returns the count.
    The rows are written to an Arrow stream in batches (never all in memory), which datasets then
    saves; everything is built in a temp folder beside ``out`` and renamed only on success."""
    import pyarrow as pa

    import datasets

    from dpr_xrisk.io.common import atomic_dir

    datasets.disable_progress_bars()
    out = Path(out)
    rows = iter(rows)
    n = 0
    with atomic_dir(out, overwrite=overwrite) as tmp:
        stream = tmp.parent / f".{out.name}.rows.arrow"
        try:
            writer = schema = None
            while True:
                batch = [r for _, r in zip(range(BATCH), rows)]
                if not batch:
                    break
                rb = pa.RecordBatch.from_pylist(batch, schema=schema)
                if writer is None:
                    schema = rb.schema
                    writer = pa.ipc.new_stream(str(stream), schema)
                writer.write_batch(rb)
                n += len(batch)
            if writer is None:
                raise InputError("nothing to write (no rows)", out)
            writer.close()
            ds = datasets.Dataset.from_file(str(stream), in_memory=False)
            ds.save_to_disk(str(tmp / "data"))
            del ds
            for f in (tmp / "data").iterdir():
                f.rename(tmp / f.name)
            (tmp / "data").rmdir()
        finally:
            stream.unlink(missing_ok=True)
    return n
