"""File plumbing shared by every reader and writer: opening with clear errors, numbered lines,
JSON lines with located errors, and atomic writes (temp file + rename) for files, folders and
groups of files. Every output is staged under a temp name and moved in only on success (removed on
failure), and errors raised while staging name the user's path, never the temp one."""

from __future__ import annotations

import codecs
import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import IO, Iterator

from dpr_xrisk.errors import InputError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def check_file(path: str | Path) -> Path:
    """Return ``path`` as a Path if it is a readable file, else raise a located InputError."""
    p = Path(path)
    if not p.exists():
        raise InputError("file not found", p)
    if p.is_dir():
        raise InputError("is a directory, expected a file", p)
    if not os.access(p, os.R_OK):
        raise InputError("file is not readable", p)
    return p


def numbered_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """Yield (1-based line number, line without its line break).

    ``\n`` is the only line break: a bare ``\r`` inside a line stays in its text (it never splits
    a record), a ``\r\n`` ending is one break. A UTF-8 byte-order mark at the start is dropped.
    Undecodable bytes are an error naming their own line.
    """
    p = check_file(path)
    with open(p, "rb") as f:
        for lineno, raw in enumerate(f, start=1):  # binary files split on b"\n" only
            if lineno == 1 and raw.startswith(codecs.BOM_UTF8):
                raw = raw[len(codecs.BOM_UTF8):]
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise InputError(f"not valid UTF-8 ({e.reason} at byte {e.start + 1} of the line)", p, lineno) from None
            if line.endswith("\n"):
                line = line[:-1]
                if line.endswith("\r"):
                    line = line[:-1]
            yield lineno, line


def json_lines(path: str | Path) -> Iterator[tuple[int, dict]]:
    """Yield (line number, object) for each non-blank line of a JSONL file."""
    for lineno, line in numbered_lines(path):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise InputError(f"malformed JSON ({e.msg})", path, lineno) from None
        if not isinstance(obj, dict):
            raise InputError("expected a JSON object on each line", path, lineno)
        yield lineno, obj


def load_json(path: str | Path):
    """Load a whole JSON file (a UTF-8 byte-order mark is allowed); errors name the line."""
    p = check_file(path)
    raw = p.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise InputError(f"not valid UTF-8 ({e.reason})", p, line) from None
    del raw  # a large training file is not held twice while it is parsed
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"malformed JSON ({e.msg})", p, e.lineno) from None


def require(obj: dict, key: str, path, line, kind=str):
    """Return obj[key], which must exist, be of ``kind`` and (for strings) be non-empty."""
    if key not in obj:
        raise InputError(f"missing required field {key!r}", path, line)
    value = obj[key]
    if kind is not None and not isinstance(value, kind):
        raise InputError(f"field {key!r} must be {kind.__name__}, got {type(value).__name__}", path, line)
    if isinstance(value, str) and not value.strip():
        raise InputError(f"field {key!r} is empty", path, line)
    return value


def check_output(path: str | Path, folder: bool = False) -> Path:
    """An output path that can be created: no ancestor of it is a file (``mkdir`` would say
    only "File exists"), and a file output is not an existing folder (nor a folder output an
    existing file). Returns it as a Path."""
    p = Path(path)
    for parent in p.absolute().parents:
        if parent.exists():
            if not parent.is_dir():
                raise InputError(f"cannot be created: {parent} is a file, not a folder", p)
            break
    if p.exists() and p.is_dir() != folder:
        raise InputError("is a folder; give a file path" if not folder else "exists and is a file, not a folder", p)
    return p


def user_paths(e: BaseException, tmp: Path, final: Path) -> None:
    """Make an error that names a temp path name the user's path instead (in place)."""
    t, f = str(tmp), str(final)
    if isinstance(e, OSError):
        for attr in ("filename", "filename2"):
            v = getattr(e, attr, None)
            if isinstance(v, str) and t in v:
                setattr(e, attr, v.replace(t, f))
    if isinstance(e, InputError) and e.path and t in e.path:
        e.path = e.path.replace(t, f)
    if e.args and isinstance(e.args[0], str) and t in e.args[0]:
        e.args = (e.args[0].replace(t, f), *e.args[1:])


def check_apart(source, out, what: str) -> None:
    """``out`` must be neither the ``source`` folder a command reads nor inside it nor around it:
    with --overwrite the output would replace (or be written into) its own input."""
    src, dst = Path(source).resolve(), Path(out).resolve()
    if src == dst or src in dst.parents or dst in src.parents:
        rel = "is" if src == dst else ("is inside" if src in dst.parents else "contains")
        raise InputError(f"--out {rel} the {what} it is made from ({source}); give another --out", out)


@contextlib.contextmanager
def staged_files(paths) -> Iterator[list[Path]]:
    """Temp paths beside each of ``paths`` (files, all checked first); on success every one is
    renamed into place, on any failure all are removed: several outputs of one command appear
    together or not at all."""
    finals = [check_output(p) for p in paths]
    if len(set(map(os.path.abspath, finals))) != len(finals):
        raise InputError("the same output path is given twice", finals[0])
    tmps = []
    try:
        for p in finals:
            p.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
            os.close(fd)
            os.chmod(tmp, 0o666 & ~_umask())
            tmps.append(Path(tmp))
        try:
            yield tmps
        except BaseException as e:
            for t, p in zip(tmps, finals):
                user_paths(e, t, p)
            raise
        for t, p in zip(tmps, finals):
            os.replace(t, p)
    finally:
        for t in tmps:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(t)


@contextlib.contextmanager
def atomic_write(path: str | Path, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO]:
    """Write to a temp file beside ``path`` and rename it into place only on success."""
    path = check_output(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600 files; outputs get the usual permissions
    try:
        with open(tmp, mode, encoding=None if "b" in mode else encoding) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        user_paths(e, Path(tmp), path)
        raise


@contextlib.contextmanager
def atomic_dir(path: str | Path, overwrite: bool = False) -> Iterator[Path]:
    """Build a folder under a temp name and rename it to ``path`` only on success."""
    path = Path(path)
    if path.exists() and not overwrite:
        raise InputError("output folder already exists (use --overwrite to replace it)", path)
    check_output(path, folder=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    os.chmod(tmp, 0o777 & ~_umask())
    try:
        yield tmp
        if path.exists():
            shutil.rmtree(path)
        os.replace(tmp, path)
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)
        user_paths(e, tmp, path)  # messages name the user's folder, never the temp one
        raise


def write_json(path: str | Path, obj, indent: int | None = 2) -> None:
    with atomic_write(path) as f:
        json.dump(obj, f, indent=indent, ensure_ascii=False)
        f.write("\n")
