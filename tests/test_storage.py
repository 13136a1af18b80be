"""Files: the tree round trip, atomic writes, damaged and foreign files, deepgp 0.1's pickles."""

import json
import math
import os

import numpy as np
import pytest
import torch
from safetensors.torch import save as safetensors_bytes

from deepgp import storage


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
    assert not storage.is_legacy(tmp_path / "f") and storage.read(tmp_path / "f", storage.MODEL)["pad"] == "x" * pad


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
