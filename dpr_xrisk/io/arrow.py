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


def _check_not_dict(p: Path) -> None:
    """A ``DatasetDict`` folder holds one folder per split: name them, so the user can pick one."""
    if p.is_dir() and (p / "dataset_dict.json").exists():
        import json

        try:
            splits = json.loads((p / "dataset_dict.json").read_text()).get("splits") or []
        except (ValueError, AttributeError, OSError):
            splits = []
        splits = [str(s) for s in splits] or sorted(d.name for d in p.iterdir() if (d / "state.json").exists())
        hint = f": give one split's folder, e.g. {p / splits[0]}" if splits else ": give the folder of one split"
        raise InputError(f"holds several splits (a DatasetDict: {', '.join(splits) or 'none found'}){hint}", p)


def _open_saved(p: Path):
    import datasets

    _check_not_dict(p)
    datasets.disable_progress_bars()
    try:
        return datasets.load_from_disk(str(p))
    except Exception as e:  # noqa: BLE001 - a damaged folder: datasets' own message
        raise InputError(f"cannot load the dataset ({type(e).__name__}: {e})", p) from None


def schema(path: str | Path):
    """The table's pyarrow schema (column names and types)."""
    p = Path(path)
    _check_not_dict(p)
    if p.is_dir() and (p / "state.json").exists():
        return _open_saved(p).features.arrow_schema
    import pyarrow.parquet as pq

    files = _parquet_files(p)
    if not files:
        raise InputError("no Parquet files and no saved dataset in this folder", p)
    try:
        schemas = [pq.read_schema(f) for f in files]
    except Exception as e:  # noqa: BLE001
        raise InputError(f"cannot read the Parquet schema ({e})", p) from None
    if any(s.names != schemas[0].names for s in schemas):
        raise InputError("Parquet shards with different columns", p)
    return schemas[0]


def column_names(path: str | Path) -> list[str]:
    return list(schema(path).names)


def _kind(t) -> str:
    import pyarrow as pa

    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    if pa.types.is_integer(t):
        return "integer"
    if pa.types.is_null(t):
        return "null"
    if (pa.types.is_list(t) or pa.types.is_large_list(t)) and _kind(t.value_type) in ("string", "null"):
        return "list of strings"
    return str(t)


def check_column_types(path, want: dict[str, tuple[str, ...]]) -> None:
    """Each column named in ``want`` (if present) must be of one of the kinds given ("string",
    "integer", "list of strings"; an all-null column passes): a type that would be read wrongly in
    silence -- float ids read as "1.0", a list of answers stored as one string -- is an error
    naming the column and its type."""
    sch = schema(path)
    for name, kinds in want.items():
        if name not in sch.names:
            continue
        kind = _kind(sch.field(name).type)
        if kind != "null" and kind not in kinds:
            hint = {"id": " (ids would read as '1.0'; store them as strings or integers)",
                    "answers": " (a list stored as one string? store a list column, e.g. [\"a\", \"b\"])"}
            key = "id" if name in ("id", "_id", "docid", "qid") else name
            raise InputError(f"column {name!r} is {kind}, expected {' or '.join(kinds)}{hint.get(key, '')}", path)


def num_rows(path: str | Path) -> int:
    p = Path(path)
    _check_not_dict(p)
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
    _check_not_dict(p)
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
