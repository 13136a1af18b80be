"""Files that hold models, estimators and training checkpoints: opening one never runs code, and a
failed write never costs the file that was there.

**Format.** Every file is a `safetensors <https://github.com/huggingface/safetensors>`_ file: an
8-byte length, a JSON header, then the raw bytes of the tensors. Reading one parses JSON and copies
bytes; unlike a pickle (``torch.save``), nothing in it can execute. The header's metadata holds

* ``format``: what the file is, e.g. ``deepgp-model/2`` (:data:`MODEL`, :data:`REGRESSOR`,
  :data:`CHECKPOINT`);
* ``deepgp``: the version that wrote it (a file a newer deepgp wrote and this one cannot read is
  refused saying so: :func:`written_by`);
* ``tree``: the saved object as JSON, in which each tensor is a reference ``{"$tensor": name}`` to
  one of the file's tensors (named by its place in the tree, e.g. ``state/layers.0.Z``), and the
  few values JSON lacks are spelt out: ``{"$tuple": [...]}``, ``{"$dict": [[key, value], ...]}``
  (a dict whose keys are not all strings) and ``{"$float": "nan"}``: optimiser state is keyed by
  integers, settings hold tuples and a bound can be NaN, which plain JSON would change or refuse.

Any safetensors reader can list a file's tensors and read its metadata.

**Writing** goes to a temporary file beside the target, flushed to disk, then renamed over it
(``os.replace``, atomic): an interrupted or failed save leaves the old file as it was.

**Old files.** deepgp 0.1 wrote pickles (``torch.save``), which can run code when opened. They are
refused with a message that says how to convert one whose origin is trusted (:mod:`deepgp.legacy`,
behind an explicit ``trust=True`` / ``deepgp convert --trust``).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import secrets
import stat
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover (Windows)
    fcntl = None

import filelock
import numpy as np
import torch
from packaging.version import InvalidVersion, Version
from safetensors import SafetensorError, safe_open
from safetensors.torch import save as save_safetensors

from . import version

# (the file formats, named here too: storage.MODEL is where readers of files look for them)
from .kinds import CHECKPOINT as CHECKPOINT
from .kinds import CHECKPOINT_FILE, MODEL_FILE, NOUN, WHAT, Kind, format_of
from .kinds import MODEL as MODEL
from .kinds import REGRESSOR as REGRESSOR
from .legacy import legacy_message, read_legacy, starts_like_torch_save


# -- the tree: JSON plus named tensors -------------------------------------------------------------
def pack(tree) -> tuple[object, dict[str, torch.Tensor]]:
    """(JSON-ready object, {name: tensor}) for a tree of dicts, lists, tuples, real dense tensors,
    numpy arrays and plain scalars; anything else is a ValueError naming its place in the tree
    (nothing is pickled). What :func:`unpack` gives back: numpy arrays as tensors, tensors detached
    and on the CPU, ``torch.Size`` as a tuple."""
    tensors: dict[str, torch.Tensor] = {}

    def name_for(where: str) -> str:
        name, i = where or "value", 1
        while name in tensors:  # e.g. keys 0 and "0" in one dict
            name, i = f"{where}~{i}", i + 1
        return name

    def refuse(what: str, where: str):
        raise ValueError(f"cannot save {what} (at {where or 'the top'}): files hold real tensors, numbers, strings, "
                         "lists and dicts only")

    def walk(value, where: str):
        if isinstance(value, np.ndarray):
            if value.dtype.kind not in "biuf":
                refuse(f"a numpy array of dtype {value.dtype}", where)
            value = torch.from_numpy(np.ascontiguousarray(value, dtype=value.dtype.newbyteorder("=")))
        if isinstance(value, torch.Tensor):
            if value.layout != torch.strided or value.is_complex():
                refuse(f"a {value.layout} tensor of dtype {value.dtype}", where)
            name = name_for(where)
            # a copy of its own: safetensors refuses tensors that share memory (e.g. one W in two layers)
            tensors[name] = value.detach().to("cpu", copy=True).contiguous()
            return {"$tensor": name}
        if isinstance(value, np.generic):
            value = value.item()
        if value is None or isinstance(value, (bool, int, str)):
            return value
        if isinstance(value, float):
            return value if math.isfinite(value) else {"$float": repr(value)}
        if isinstance(value, torch.Size):
            value = tuple(value)
        if isinstance(value, (list, tuple)):
            items = [walk(v, f"{where}/{i}" if where else str(i)) for i, v in enumerate(value)]
            return {"$tuple": items} if isinstance(value, tuple) else items
        if isinstance(value, dict):
            if all(isinstance(k, str) and not k.startswith("$") for k in value):
                return {k: walk(v, f"{where}/{k}" if where else k) for k, v in value.items()}
            for k in value:
                if not (k is None or isinstance(k, (bool, int, str)) or (isinstance(k, float) and math.isfinite(k))):
                    refuse(f"the dict key {k!r}", where)
            return {"$dict": [[k, walk(v, f"{where}/{k}" if where else str(k))] for k, v in value.items()]}
        refuse(f"a value of type {type(value).__name__}", where)

    return walk(tree, ""), tensors


def unpack(obj, tensors: dict[str, torch.Tensor]):
    """The inverse of :func:`pack`; a malformed tree is a ValueError."""
    if isinstance(obj, list):
        return [unpack(v, tensors) for v in obj]
    if not isinstance(obj, dict):
        return obj
    if len(obj) == 1:
        (key, value), = obj.items()
        if key == "$tensor":
            if not isinstance(value, str) or value not in tensors:
                raise ValueError(f"a reference to a missing tensor {value!r}")
            return tensors[value]
        if key == "$tuple" and isinstance(value, list):
            return tuple(unpack(v, tensors) for v in value)
        if key == "$float" and value in ("nan", "inf", "-inf"):
            return float(value)
        if key == "$dict" and isinstance(value, list) and all(isinstance(p, list) and len(p) == 2 for p in value):
            return {k: unpack(v, tensors) for k, v in value}
    if any(k.startswith("$") for k in obj):
        raise ValueError(f"an unknown entry {sorted(obj)[0]!r}")
    return {k: unpack(v, tensors) for k, v in obj.items()}


# -- reading and writing ---------------------------------------------------------------------------
def check_writable(path, what: str = "the file") -> Path:
    """``path`` as a Path, or a ValueError if a file cannot be written there (call before long work).

    Only a regular file is ever replaced (never a device, a pipe or a folder), and the folder must
    exist (none is made: a mistyped folder is an error, not a new tree) and take a new file: one is
    created and removed to find out, as :func:`write_bytes` will need it.
    """
    if not isinstance(path, (str, os.PathLike)) or not str(path):
        raise ValueError(f"{what}: expected a file name, got {path!r}")
    path = Path(path)
    real = Path(os.path.realpath(path))
    if path.is_dir():
        raise ValueError(f"cannot write {what} to {path}: it is a folder; give a file name")
    if real.exists() and not real.is_file():
        raise ValueError(f"cannot write {what} to {path}: it is not a regular file (a device or a pipe?)")
    if real.exists() and not os.access(real, os.W_OK):  # (write_bytes refuses to replace it)
        raise ValueError(f"cannot write {what} to {path}: it is read-only")
    folder = real.parent
    if not folder.is_dir():  # (a link's: the folder of the file it names, where the file would go)
        named = path.parent if os.path.realpath(path.parent) == str(folder) else folder
        raise ValueError(f"cannot write {what} to {path}: the folder {named} does not exist")
    probe = _temporary(real)
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except OSError as err:
        raise ValueError(f"cannot write {what} to {path}: {err.strerror or err} in {folder}") from None
    probe.unlink(missing_ok=True)
    return path


def check_output(path, what: str, inputs=(), outputs=(), kind: Kind | None = None) -> Path:
    """:func:`check_writable`, and a ValueError if ``path`` is one of ``inputs``, the files the command
    reads (writing there would replace what it was given), one of ``outputs`` ((what, path) pairs:
    the command's other outputs, of which one would replace the other), or, given the ``kind`` of file the
    command writes, a file there of another kind (a data or results file given by mistake; an empty file
    holds nothing to lose). Files are compared by identity (:func:`same_file`): a link is the file it names.
    Call before any work."""
    path = check_writable(path, what)
    for source in inputs:
        if source is not None and Path(source).exists() and same_file(path, source):
            raise ValueError(f"cannot write {what} to {path}: it is the command's own input {source}")
    for other_what, other in outputs:
        if other is not None and same_file(path, other):
            raise ValueError(f"cannot write {what} to {path}: {other_what} goes there ({other}); give each its "
                             "own file")
    real = Path(os.path.realpath(path))
    if kind is not None and real.is_file() and real.stat().st_size and not kind.test(real):
        found = format_of(real)
        said = f"; it is {WHAT[found]}" if found in WHAT else ""
        raise ValueError(f"cannot write {what} to {path}: the file there is not {kind.noun}{said}, so it is not "
                         "replaced; give another name (or remove it)")
    return path


def same_file(a, b) -> bool:
    """Whether the names ``a`` and ``b`` are one file: by identity (device and inode) where both exist,
    so that a symbolic or hard link is the file it names; else by their resolved paths (``x`` and
    ``./x``, or a link to where a file will be written, are one file not yet written)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


@contextlib.contextmanager
def locked(path, create: bool = False):
    """An exclusive lock on the file ``path`` names, held while the block runs; yields a descriptor of
    it open for appending (``os.write`` of a whole line on it is one atomic append).

    The lock belongs to the file, not to the name: every name of it (a symbolic or hard link) shares
    it, and a file replaced under its name while this waited (:func:`write_bytes`) is locked afresh.
    No lock file is made beside it. ``create``: a missing file is created empty first. A process that
    dies releases its lock. (Where the system has no ``flock``, a lock file ``<resolved name>.lock``
    beside it stands in, shared by the names that resolve to it.)"""
    real = os.path.realpath(path)
    flags = os.O_RDWR | os.O_APPEND | (os.O_CREAT if create else 0)
    if fcntl is None:  # pragma: no cover (Windows)
        with filelock.FileLock(real + ".lock"):
            fd = os.open(real, flags, 0o666)
            try:
                yield fd
            finally:
                os.close(fd)
        return
    while True:
        fd = os.open(real, flags, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if _identity(os.fstat(fd)) == _identity_of(real):
                yield fd
                return
        finally:
            os.close(fd)  # (which releases the lock)


def _identity(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino


def _identity_of(path) -> tuple[int, int] | None:
    try:
        return _identity(os.stat(path))
    except FileNotFoundError:
        return None


def _temporary(path: Path) -> Path:
    """A fresh name beside ``path`` for the file that will replace it."""
    return path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")


def write_bytes(path, data: bytes) -> None:
    """Replace ``path`` by ``data`` atomically: written beside it, flushed to disk, then renamed over
    it (and the folder flushed). A symbolic link keeps pointing at its file, which is the one
    replaced; a replaced file keeps its permissions; a read-only file is refused."""
    given, path = path, Path(os.path.realpath(path))
    old = path.stat() if path.exists() else None
    if old is not None and not stat.S_ISREG(old.st_mode):
        raise ValueError(f"{given} is not a regular file (a device or a pipe?); not replaced")
    if old is not None and not os.access(path, os.W_OK):
        raise PermissionError(f"{given} is read-only; not replaced")
    tmp = _temporary(path)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # 0o666 & ~umask, as open() would
        with os.fdopen(fd, "wb") as f:
            if old is not None:
                os.chmod(f.fileno(), stat.S_IMODE(old.st_mode))
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as err:  # named: "No space left on device: model.safetensors", not the temporary
        tmp.unlink(missing_ok=True)
        raise OSError(err.errno, err.strerror or str(err), str(given)) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    try:  # the rename itself survives a crash once the folder's entry is on disk
        folder = os.open(path.parent, os.O_RDONLY)
    except OSError:  # (a folder cannot be opened on every system)
        return
    try:
        os.fsync(folder)
    except OSError:
        pass
    finally:
        os.close(folder)


def write(path, kind: str, tree) -> None:
    """Save ``tree`` as a file of format ``kind`` (atomic; see the module docstring), replacing only a file
    of its kind (a model file, or a checkpoint) or an empty one: a data file or any other given by mistake
    is refused by name, and kept."""
    check_output(path, NOUN[kind], kind=CHECKPOINT_FILE if kind == CHECKPOINT else MODEL_FILE)
    obj, tensors = pack(tree)
    tree_text = json.dumps(obj, allow_nan=False, separators=(",", ":"))
    header = {"format": kind, "deepgp": version.__version__, "tree": tree_text}
    try:
        data = save_safetensors(tensors, metadata=header)
    except Exception as err:  # safetensors refuses a dtype it does not know, for example
        raise ValueError(f"cannot save {NOUN[kind]}: {' '.join(str(err).split())}") from None
    write_bytes(path, data)


def read(path, kind: str, trust: bool = False):
    """The tree saved in ``path`` by :func:`write` with format ``kind``.

    Refused with a one-line ValueError naming the file: a missing file (FileNotFoundError), a file of
    another format, a damaged or truncated file, and deepgp 0.1's pickle files — unless ``trust``,
    for which such a file is unpickled by :func:`deepgp.legacy.read_legacy`, **which runs any code it holds**.
    """
    if trust is not True and trust is not False:  # "False" or 0 must never open the pickle door
        raise ValueError(f"trust must be True or False, got {trust!r}")
    if not isinstance(path, (str, os.PathLike)) or not str(path):
        raise ValueError(f"expected a file name, got {path!r}")
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no such file: {path}")
    if not path.is_file():
        raise ValueError(f"{path} is not a file, so not {WHAT[kind]}")
    with open(path, "rb") as f:
        head = f.read(9)
    if starts_like_torch_save(head):
        if not trust:
            raise ValueError(legacy_message(path, kind))
        found, tree = read_legacy(path)
        if found != kind:
            raise ValueError(f"{path} is not {WHAT[kind]}; it is {WHAT[found]}")
        return tree
    try:
        with safe_open(str(path), framework="pt", device="cpu") as f:
            meta = f.metadata() or {}
            tensors = {name: f.get_tensor(name) for name in f.keys()}
    except (SafetensorError, OSError, ValueError, RuntimeError) as err:
        if len(head) < 8 or "header" in str(err).lower() or "metadata" in str(err).lower():
            raise ValueError(f"{path} is not {WHAT[kind]} (or it is damaged or cut short)") from None
        raise ValueError(f"{path} could not be read: {' '.join(str(err).split())}") from None
    found = meta.get("format")
    if found != kind:
        family, _, number = kind.rpartition("/")
        other_number = found.rpartition("/")[2] if isinstance(found, str) and found.startswith(family + "/") else ""
        if re.fullmatch(r"[0-9]{1,6}", other_number) and int(other_number) != int(number):
            # the same kind of file in another layout: say which deepgp reads it
            advice = "upgrade deepgp to read it" if int(other_number) > int(number) else "an older deepgp reads it"
            by = f" (written by deepgp {meta['deepgp']})" if _as_version(meta.get("deepgp")) is not None else ""
            raise ValueError(f"{path} is {WHAT[kind]} in the layout {found}{by}; this deepgp ({_version()}) "
                             f"reads {kind}: {advice}")
        other = f"; it is {WHAT[found]}" if found in WHAT else ""
        raise ValueError(f"{path} is not {WHAT[kind]}{other}")
    with written_by(path):  # (a newer deepgp may spell its contents in a way this one does not know)
        named: list = []  # the tensors the tree refers to: each tensor written is named once

        def note_reference(obj: dict) -> dict:  # (json calls it on every object it parses)
            if obj.keys() == {"$tensor"}:
                named.append(obj["$tensor"])
            return obj

        try:
            tree = json.loads(meta["tree"], object_hook=note_reference)
            value, unnamed = unpack(tree, tensors), sorted(set(tensors) - set(named))
        except (KeyError, TypeError, ValueError, RecursionError) as err:
            raise ValueError(f"{path} is damaged: its contents do not parse ({type(err).__name__})") from None
        if unnamed:
            raise ValueError(f"{path} is damaged: it holds tensors its contents do not name ({unnamed[0]!r}, ...)")
        return value


def _version() -> str:
    return version.__version__  # (read when called: a test may set it)


def _as_version(text):
    """``text`` as a PEP 440 version (packaging's ``Version``), or None: not a string, over 64
    characters (a header is not trusted: its text goes into messages) or not a version."""
    if not isinstance(text, str) or len(text) > 64:
        return None
    try:
        return Version(text)
    except InvalidVersion:
        return None


def newer_than_this(found) -> bool:
    """Whether ``found`` (the version in a file's header) is a later release than this deepgp, by
    PEP 440's order (``0.2.0.dev0`` < ``0.2.0rc1`` < ``0.2.0`` = ``0.2``); False where either is
    not a version, and for a source tree of unknown version (``0+unknown``)."""
    theirs, ours = _as_version(found), _as_version(_version())
    return theirs is not None and ours is not None and _version() != "0+unknown" and theirs > ours


def writer(path) -> str | None:
    """The deepgp version recorded in the header of the file at ``path``; None where it names none
    that is a version (so the text returned is safe to put in a one-line message)."""
    try:
        with safe_open(str(path), framework="pt", device="cpu") as f:
            found = (f.metadata() or {}).get("deepgp")
    except Exception:  # (only a hint for a message: a file that cannot say is no newer)
        return None
    return found if _as_version(found) is not None else None


@contextlib.contextmanager
def written_by(path):
    """Checks a file's contents; a ValueError about a file that a newer deepgp wrote says so: a
    setting or value this version does not know would otherwise read as damage."""
    try:
        yield
    except ValueError as err:
        found = writer(path)
        if found is None or not newer_than_this(found):
            raise
        said = str(err).removesuffix(" (written by a newer deepgp?)")
        for damaged in (" is damaged or incomplete", " is damaged"):  # newer, so not known to be damaged
            if damaged in said:
                said = said.replace(damaged, " could not be read by this deepgp", 1)
                break
        raise ValueError(f"{said} (written by deepgp {found}, newer than this deepgp {_version()}: "
                         "a newer deepgp may read it)") from None


def field(tree, name: str, kind: type | tuple[type, ...], path, optional: bool = False):
    """``tree[name]`` checked to be of type ``kind``: a damaged file is a ValueError naming the field."""
    if not isinstance(tree, dict):
        raise ValueError(f"{path} is damaged: expected a table of fields, found {type(tree).__name__}")
    if name not in tree or (optional and tree[name] is None):
        if optional:
            return None
        raise ValueError(f"{path} is damaged or incomplete: it lacks the field {name!r}")
    value = tree[name]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    # True is an int in Python, not in a file
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        expected = " or ".join(k.__name__ for k in kinds)
        raise ValueError(f"{path} is damaged: the field {name!r} is a {type(value).__name__}, not a {expected}")
    return value
