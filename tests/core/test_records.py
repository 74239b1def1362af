"""Result records and atomic writes: a replaced file gets the mode a plain open() would give it."""
import os
import stat
import subprocess
import sys

import pytest

from harness.core.records import write_atomic
from helpers import ROOT

WRITE = ("import sys; from harness.core.records import write_atomic; "
         "write_atomic(sys.argv[1], 'new\\n', mode=int(sys.argv[2], 8))")


def written_mode(path, umask: int, mode: int = 0o666) -> int:
    """The mode write_atomic gives `path` in a process with `umask` (the umask is process-wide)."""
    subprocess.run([sys.executable, "-c", WRITE, str(path), oct(mode)], cwd=ROOT, umask=umask, check=True,
                   env=dict(os.environ, PYTHONPATH=ROOT), timeout=120)
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.parametrize("umask, mode, expected", [
    (0o022, 0o666, 0o644), (0o002, 0o666, 0o664), (0o077, 0o666, 0o600), (0o027, 0o666, 0o640),
    (0o022, 0o777, 0o755),  # a repro script: executable as the umask allows
], ids=lambda v: f"{v:04o}")
def test_write_atomic_gives_the_mode_less_the_umask(tmp_path, umask, mode, expected):
    target = tmp_path / "sub" / "report.html"
    assert written_mode(target, umask, mode) == expected
    assert target.read_text() == "new\n" and os.listdir(tmp_path / "sub") == ["report.html"]


def test_write_atomic_replaces_whole_and_leaves_no_temporary_file(tmp_path):
    target = tmp_path / "summary.md"
    target.write_text("old\n")
    os.chmod(target, 0o600)
    assert written_mode(target, 0o022) == 0o644  # the new file's mode, as open(..., "w") of a new file
    assert target.read_text() == "new\n" and os.listdir(tmp_path) == ["summary.md"]
    (tmp_path / "blocked").mkdir()
    with pytest.raises(IsADirectoryError):
        write_atomic(str(tmp_path / "blocked"), "x")  # a folder in the way: the error, no temporary file left
    assert sorted(os.listdir(tmp_path)) == ["blocked", "summary.md"]
