"""The store of captured tensors (docs/contracts.md §1, input kind `captured`): a tensor by its content hash.

A norm instance's input, captured from a whole model's run (`normdiff model`),
is kept as its raw little-endian bytes in its dtype, in `STORE/HEX.bin` where
HEX is the SHA-256 of those bytes; the spec's `shape` and `dtype` say how to
read them. A case names the tensor by its hash, so its case_id depends on the
very bytes and nothing else, in every process. Workers find the store folders
in the environment variable CAPTURED_ENV (folders separated by os.pathsep),
which the command that captured sets (OUT/captured) and workers inherit.
"""
from __future__ import annotations

import hashlib
import os
import re

import numpy as np

from harness.core.dtypes import np_dtype

CAPTURED_ENV = "NORMDIFF_CAPTURED"
FOLDER = "captured"  # the store beside a run's results: OUT/captured
SUFFIX = ".bin"
HEX = re.compile(r"^[0-9a-f]{64}$")


class CapturedMissing(LookupError):
    """No store folder holds the tensor a case names (one line: the hash and where it was looked for)."""


def digest(array: np.ndarray) -> str:
    """The SHA-256 of the array's raw bytes (C order): its name in the store."""
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()


def store_folders() -> list[str]:
    """The store folders this process knows: those of CAPTURED_ENV, in order."""
    return [f for f in os.environ.get(CAPTURED_ENV, "").split(os.pathsep) if f]


def use_store(folder: str) -> None:
    """Make `folder` known to this process and the workers it starts (first in CAPTURED_ENV)."""
    folder = os.path.abspath(folder)
    rest = [f for f in store_folders() if f != folder]
    os.environ[CAPTURED_ENV] = os.pathsep.join([folder, *rest])


def use_store_beside(path: str) -> None:
    """Know the store beside a results or spec file (its folder's captured/), if there is one (appended)."""
    folder = os.path.abspath(os.path.join(os.path.dirname(path) or os.curdir, FOLDER))
    if os.path.isdir(folder) and folder not in store_folders():
        os.environ[CAPTURED_ENV] = os.pathsep.join([*store_folders(), folder])


def put(folder: str, array: np.ndarray) -> str:
    """Write `array` into the store `folder` (atomically, once); its hash."""
    data = np.ascontiguousarray(array).tobytes()
    hexd = hashlib.sha256(data).hexdigest()
    os.makedirs(folder, exist_ok=True)
    target = os.path.join(folder, hexd + SUFFIX)
    if not os.path.exists(target):
        tmp = f"{target}.{os.getpid()}.tmp"
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, target)
    return hexd


def find(hexd: str, folders: list[str] | None = None) -> str:
    """The file of tensor `hexd` in the store folders (CapturedMissing if none holds it)."""
    folders = store_folders() if folders is None else folders
    for folder in folders:
        candidate = os.path.join(folder, hexd + SUFFIX)
        if os.path.exists(candidate):
            return candidate
    where = ", ".join(folders) or f"no folder (set {CAPTURED_ENV})"
    raise CapturedMissing(f"captured input {hexd[:12]}… is in no store folder ({where})")


def load(hexd: str, shape, dtype: str, folders: list[str] | None = None) -> np.ndarray:
    """The tensor `hexd` as `dtype` of `shape`, its bytes checked against its hash."""
    with open(find(hexd, folders), "rb") as fh:
        data = fh.read()
    if hashlib.sha256(data).hexdigest() != hexd:
        raise CapturedMissing(f"captured input {hexd[:12]}…: its file's bytes do not match its hash")
    array = np.frombuffer(data, dtype=np_dtype(dtype))
    if array.size != int(np.prod(shape)):
        raise CapturedMissing(f"captured input {hexd[:12]}… holds {array.size} {dtype} values, "
                              f"not the {int(np.prod(shape))} of shape {list(shape)}")
    return array.reshape(tuple(shape)).copy()
