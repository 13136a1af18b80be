"""Files: the tree round trip, atomic writes, damaged and foreign files, deepgp 0.1's pickles."""

import json
import math
import os

import filelock
import numpy as np
import pytest
import torch
from safetensors.torch import save as safetensors_bytes

from deepgp import legacy, storage


def test_pack_round_trips_every_kind_of_value(tmp_path):
    W = torch.randn(3, 2, dtype=torch.float64)
    tree = {
        "config": {"spec": "LV-GP", "encoder_hidden": (20, 20), "flag": False, "none": None, "lr": 0.005},
        "state": {"a.W": W, "b.W": W, "n": torch.tensor(3), "empty": torch.zeros(0), "u8": torch.arange(4).byte()},
        "adam": {"state": {0: {"step": torch.tensor(5.0)}, 1: {"step": torch.tensor(6.0)}},
                 "groups": [{"betas": (0.9, 0.99)}]},
        "numbers": [math.nan, math.inf, -math.inf, 1, np.float64(2.5), np.int64(7)],
        "array": np.arange(3.0),
        "$odd": "a key that starts with a dollar",
    }
    storage.write(tmp_path / "f", storage.MODEL, tree)
    back = storage.read(tmp_path / "f", storage.MODEL)
    assert back["config"] == tree["config"] and isinstance(back["config"]["encoder_hidden"], tuple)
    assert torch.equal(back["state"]["a.W"], W) and torch.equal(back["state"]["b.W"], W)  # shared memory saved twice
    assert back["state"]["u8"].dtype == torch.uint8 and back["state"]["empty"].shape == (0,)
    assert set(back["adam"]["state"]) == {0, 1} and back["adam"]["groups"][0]["betas"] == (0.9, 0.99)
    assert math.isnan(back["numbers"][0]) and back["numbers"][1:] == [math.inf, -math.inf, 1, 2.5, 7]
    assert torch.equal(back["array"], torch.arange(3.0, dtype=torch.float64))
    assert back["$odd"] == tree["$odd"]


def test_only_plain_values_are_saved(tmp_path):
    class Thing:
        pass

    with pytest.raises(ValueError, match=r"cannot save a value of type Thing \(at config/x\)"):
        storage.write(tmp_path / "f", storage.MODEL, {"config": {"x": Thing()}})
    assert not os.listdir(tmp_path)  # nothing written, no temporary file left behind


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "model.safetensors"
    storage.write(path, storage.MODEL, {"x": torch.ones(3)})
    good = path.read_bytes()

    def fail(*args):
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", fail)  # fails after part of the bytes were written to the temporary
    with pytest.raises(OSError, match="disk full"):
        storage.write(path, storage.MODEL, {"x": torch.zeros(1000)})
    assert path.read_bytes() == good and os.listdir(tmp_path) == ["model.safetensors"]


def test_writability_is_checked_before_any_work(tmp_path):
    with pytest.raises(ValueError, match="the folder .*missing does not exist"):
        storage.check_writable(tmp_path / "missing" / "m.safetensors", "the model")
    with pytest.raises(ValueError, match="it is a folder"):
        storage.check_writable(tmp_path, "the model")
    assert storage.check_writable(tmp_path / "m.safetensors") == tmp_path / "m.safetensors"


def test_foreign_damaged_and_other_kind_files_are_refused_by_name(tmp_path):
    storage.write(tmp_path / "ckpt", storage.CHECKPOINT, {"x": torch.ones(2)})
    good = (tmp_path / "ckpt").read_bytes()
    files = {
        "empty": b"",
        "csv": b"a,b\n1,2\n",
        "cut": good[: len(good) - 5],
        "header": good[:20],
        "noformat": safetensors_bytes({"x": torch.ones(1)}),
        "badtree": safetensors_bytes({"x": torch.ones(1)}, metadata={"format": storage.MODEL, "tree": "{not json"}),
        "dangling": safetensors_bytes({"x": torch.ones(1)}, metadata={
            "format": storage.MODEL, "tree": json.dumps({"w": {"$tensor": "nope"}})}),
        "unknown": safetensors_bytes({"x": torch.ones(1)}, metadata={
            "format": storage.MODEL,
            "tree": json.dumps({"w": {"$pickle": "gASVKAAAAAAAAACMBXBvc2l4lIwGc3lzdGVtlJOU"}})}),
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(ValueError) as err:
            storage.read(tmp_path / name, storage.MODEL)
        assert str(tmp_path / name) in str(err.value) and "\n" not in str(err.value), name
    with pytest.raises(ValueError, match="is not a model saved by deepgp .*; it is a training checkpoint"):
        storage.read(tmp_path / "ckpt", storage.MODEL)
    with pytest.raises(FileNotFoundError, match="no such file"):
        storage.read(tmp_path / "absent", storage.MODEL)


def test_a_save_replaces_only_a_file_of_its_kind(tmp_path):
    """A model saved over a data file, a checkpoint or any other file refuses by name and keeps it; a
    checkpoint over a model likewise; each replaces its own kind and an empty file."""
    import deepgp

    x = np.linspace(-1, 1, 20)[:, None]
    model = deepgp.DeepGP.from_spec("GP", x, np.sin(x), num_inducing=4)
    reg = deepgp.DeepGPRegressor(model="GP", method="vi", iterations=1, num_inducing=4, progress=False)
    reg.fit(x, np.sin(x[:, 0]))
    storage.write(tmp_path / "ck", storage.CHECKPOINT, {"iteration": 1})
    storage.write(tmp_path / "m", storage.MODEL, model.to_tree())
    for name, content in (("d.csv", b"x,y\n1,2\n"), ("s.py", b"print(1)\n"), ("ck", (tmp_path / "ck").read_bytes())):
        (tmp_path / name).write_bytes(content)
        for save in (model.save, reg.save):
            with pytest.raises(ValueError, match=f"cannot write the model to .*{name}: the file there is not a model"):
                save(tmp_path / name)
            assert (tmp_path / name).read_bytes() == content
    with pytest.raises(ValueError, match="the file there is not a training checkpoint of deepgp; it is a model"):
        storage.write(tmp_path / "m", storage.CHECKPOINT, {"iteration": 2})
    (tmp_path / "e").write_bytes(b"")
    for path in (tmp_path / "m", tmp_path / "e"):
        model.save(path)
        reg.save(path)
    storage.write(tmp_path / "ck", storage.CHECKPOINT, {"iteration": 2})


def test_pickles_are_refused_without_being_opened(tmp_path, monkeypatch):
    torch.save({"format": "deepgp-model/1"}, tmp_path / "zip.pt")
    torch.save({"format": "deepgp-model/1"}, tmp_path / "legacy.pt", _use_new_zipfile_serialization=False)

    def no_unpickling(*args, **kwargs):
        raise AssertionError("a file was unpickled")

    monkeypatch.setattr(torch, "load", no_unpickling)
    for name in ("zip.pt", "legacy.pt"):
        with pytest.raises(ValueError, match="pickle format, which can run code .*deepgp convert .* --trust"):
            storage.read(tmp_path / name, storage.MODEL)
    with pytest.raises(ValueError, match="pickle format.* Delete it to train from the start$"):
        storage.read(tmp_path / "zip.pt", storage.CHECKPOINT)


def test_a_header_length_that_starts_like_a_pickle_is_still_read(tmp_path):
    # the first byte of a safetensors file is its header length's low byte: 0x80 there is not a pickle
    for pad in range(256):
        storage.write(tmp_path / "f", storage.MODEL, {"pad": "x" * pad, "t": torch.ones(1)})
        if (tmp_path / "f").read_bytes()[0] == 0x80:
            break
    assert (tmp_path / "f").read_bytes()[0] == 0x80
    assert not legacy.is_legacy(tmp_path / "f") and storage.read(tmp_path / "f", storage.MODEL)["pad"] == "x" * pad


def test_deeply_nested_or_oddly_typed_contents_are_refused_by_name(tmp_path):
    deep = "[" * 100_000 + "]" * 100_000
    (tmp_path / "deep").write_bytes(safetensors_bytes({"x": torch.ones(1)},
                                                      metadata={"format": storage.MODEL, "tree": deep}))
    with pytest.raises(ValueError, match="deep is damaged: its contents do not parse"):
        storage.read(tmp_path / "deep", storage.MODEL)
    assert storage.field({"lr": 0.5}, "lr", (int, float), "f") == 0.5
    for value in (True, "0.5", None):
        with pytest.raises(ValueError, match="the field 'lr' is a .*, not a int or float"):
            storage.field({"lr": value}, "lr", (int, float), "f")
    for value, what in [(torch.zeros(2, dtype=torch.complex64), "complex64"),
                        (torch.eye(2).to_sparse(), "sparse"), (np.array([object()]), "dtype object"),
                        ({math.nan: 1}, "the dict key nan")]:
        with pytest.raises(ValueError, match=f"cannot save .*{what}.* .at v."):
            storage.pack({"v": value})
    big_endian = np.arange(3, dtype=">f8")
    assert torch.equal(storage.unpack(*storage.pack(big_endian)), torch.arange(3.0, dtype=torch.float64))


def test_a_replaced_file_keeps_its_link_and_permissions(tmp_path):
    target = tmp_path / "real.safetensors"
    storage.write(target, storage.MODEL, {"x": torch.ones(1)})
    os.chmod(target, 0o600)
    link = tmp_path / "link.safetensors"
    link.symlink_to(target)
    storage.write(link, storage.MODEL, {"x": torch.zeros(1)})
    assert link.is_symlink() and storage.read(target, storage.MODEL)["x"].item() == 0.0
    assert oct(target.stat().st_mode & 0o777) == oct(0o600)


def _rewrite_header(path, **changes):
    """The file at ``path`` rewritten with its header's metadata (and its tree's config) changed."""
    from safetensors import safe_open

    with safe_open(str(path), framework="pt", device="cpu") as f:
        meta, tensors = dict(f.metadata()), {k: f.get_tensor(k) for k in f.keys()}
    tree = json.loads(meta["tree"])
    tree["config"].update(changes.pop("config", {}))
    meta.update(changes, tree=json.dumps(tree))
    path.write_bytes(safetensors_bytes(tensors, metadata=meta))


@pytest.mark.parametrize("ours, theirs, newer", [
    ("0.2.0.dev0", "0.2.0", True), ("0.2.0rc1", "0.2.0", True), ("0.2.0.dev0", "0.2.0rc1", True),
    ("0.9", "0.10", True), ("1.0", "1.0.0", False), ("1.0.0", "1.0", False), ("0.2.0", "0.2.0.dev0", False),
    ("0.2.0", "1!0.1", True), ("0+unknown", "0.3.0", False),  # (a tree of unknown version cannot tell)
    ("0.2.0", "9" * 5000, False), ("0.2.0", "1.0\nTraceback", False), ("0.2.0", None, False),
])
def test_newer_than_this_orders_versions_as_pep_440(monkeypatch, ours, theirs, newer):
    monkeypatch.setattr("deepgp.version.__version__", ours)
    assert storage.newer_than_this(theirs) is newer


def test_a_file_from_a_newer_deepgp_says_so_not_that_it_is_damaged(tmp_path):
    """A value or setting this version does not know reads as damage unless the header's version is newer."""
    import deepgp

    x = torch.randn(20, 2, dtype=torch.float64)
    model = deepgp.DeepGP.from_spec("GP-GP", x, x[:, :1], num_inducing=8)
    model.save(tmp_path / "m")
    _rewrite_header(tmp_path / "m", config={"inner_width": "wider"})
    with pytest.raises(ValueError, match="is damaged") as err:
        deepgp.DeepGP.load(tmp_path / "m")
    assert "newer deepgp may" not in str(err.value)  # the same version wrote it: it is damaged
    _rewrite_header(tmp_path / "m", deepgp="99.0")
    with pytest.raises(ValueError) as err:
        deepgp.DeepGP.load(tmp_path / "m")
    said = str(err.value)
    assert said.startswith(f"{tmp_path / 'm'} could not be read by this deepgp: inner_width must be one of")
    assert said.endswith(f"(written by deepgp 99.0, newer than this deepgp {deepgp.__version__}: "
                         "a newer deepgp may read it)") and "damaged" not in said
    _rewrite_header(tmp_path / "m", config={"inner_width": "input", "halo": 1})
    with pytest.raises(ValueError, match=r"unknown field\(s\) \['halo'\] \(written by deepgp 99\.0") as err:
        deepgp.DeepGP.load(tmp_path / "m")
    assert "?" not in str(err.value) and "\n" not in str(err.value)
    _rewrite_header(tmp_path / "m", deepgp="99.0\nTraceback (most recent call last)")  # not a version: no claim
    with pytest.raises(ValueError, match=r"unknown field\(s\) \['halo'\] \(written by a newer deepgp\?\)$"):
        deepgp.DeepGP.load(tmp_path / "m")


def test_a_checkpoint_from_a_newer_deepgp_says_so(tmp_path):
    import deepgp

    x = torch.randn(30, 2, dtype=torch.float64)
    model = deepgp.DeepGP.from_spec("GP", x, x[:, :1], num_inducing=8)
    deepgp.fit(model, x, x[:, :1], iterations=3, checkpoint=tmp_path / "ck", checkpoint_every=1)
    path = tmp_path / "ck"
    from safetensors import safe_open

    with safe_open(str(path), framework="pt", device="cpu") as f:
        meta, tensors = dict(f.metadata()), {k: f.get_tensor(k) for k in f.keys()}
    tree = json.loads(meta["tree"])
    del tree["schedule"]  # a part this version needs, as if a newer one kept it elsewhere
    path.write_bytes(safetensors_bytes(tensors, metadata={**meta, "deepgp": "99.0", "tree": json.dumps(tree)}))
    with pytest.raises(ValueError, match=r"checkpoint .*ck could not be read by this deepgp \(KeyError.*"
                                         r"\(written by deepgp 99\.0, newer than this deepgp"):
        deepgp.fit(model, x, x[:, :1], iterations=4, checkpoint=path, checkpoint_every=1)


def test_another_layout_of_the_same_kind_of_file_names_the_deepgp_that_reads_it(tmp_path):
    storage.write(tmp_path / "m", storage.MODEL, {"x": torch.ones(2)})
    family = storage.MODEL.rpartition("/")[0]
    number = int(storage.MODEL.rpartition("/")[2])
    _newer = {"format": f"{family}/{number + 1}", "deepgp": "99.0", "tree": json.dumps({"x": 1})}
    (tmp_path / "new").write_bytes(safetensors_bytes({"t": torch.ones(1)}, metadata=_newer))
    with pytest.raises(ValueError, match=rf"layout {family}/{number + 1} \(written by deepgp 99\.0\).*upgrade deepgp"):
        storage.read(tmp_path / "new", storage.MODEL)
    older = {**_newer, "format": f"{family}/{number - 1}", "deepgp": "0.0.1"}
    (tmp_path / "old").write_bytes(safetensors_bytes({"t": torch.ones(1)}, metadata=older))
    with pytest.raises(ValueError, match="an older deepgp reads it"):
        storage.read(tmp_path / "old", storage.MODEL)
    for odd in ("\u00b2", "9" * 5000, f"0{number}"):  # not a layout number (or this one): another kind of file
        meta = {**_newer, "format": f"{family}/{odd}", "deepgp": "1.0\nsecond line"}
        (tmp_path / "odd").write_bytes(safetensors_bytes({"t": torch.ones(1)}, metadata=meta))
        with pytest.raises(ValueError, match=r"is not a model saved by deepgp \(DeepGP.save\)$"):
            storage.read(tmp_path / "odd", storage.MODEL)
    unparsed = {"format": storage.MODEL, "deepgp": "99.0", "tree": "{a newer spelling"}
    (tmp_path / "unparsed").write_bytes(safetensors_bytes({"t": torch.ones(1)}, metadata=unparsed))
    with pytest.raises(ValueError, match=r"unparsed could not be read by this deepgp: its contents do not parse "
                                         r"\(JSONDecodeError\) \(written by deepgp 99\.0, newer"):
        storage.read(tmp_path / "unparsed", storage.MODEL)
    no_version = {**_newer, "deepgp": "1.0\nsecond line"}  # its text is not a version: not shown
    (tmp_path / "nv").write_bytes(safetensors_bytes({"t": torch.ones(1)}, metadata=no_version))
    with pytest.raises(ValueError) as err:
        storage.read(tmp_path / "nv", storage.MODEL)
    assert "\n" not in str(err.value) and "written by" not in str(err.value)


def test_without_flock_a_lock_file_beside_the_resolved_name_holds_the_lock(tmp_path, monkeypatch):
    """Where the system has no flock (Windows), storage.locked takes filelock's lock on <resolved name>.lock:
    held while the block runs (another taker times out), shared by a symbolic link's name, released after."""
    monkeypatch.setattr(storage, "fcntl", None)
    path, link = tmp_path / "rows.csv", tmp_path / "link.csv"
    with storage.locked(path, create=True) as fd:
        os.write(fd, b"a\n")
        link.symlink_to(path)
        with pytest.raises(filelock.Timeout):
            filelock.FileLock(os.path.realpath(link) + ".lock", timeout=0).acquire()
    with storage.locked(link) as fd:
        os.write(fd, b"b\n")
    assert path.read_bytes() == b"a\nb\n"
    filelock.FileLock(str(path) + ".lock", timeout=0).acquire()  # released
