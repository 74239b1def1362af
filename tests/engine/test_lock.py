"""The folder lock: reentrant in one process, exclusive across processes."""
import os
import subprocess
import sys

from helpers import ROOT

from harness.engine.lock import folder_lock


def test_the_lock_is_reentrant_in_one_process_and_exclusive_across_processes(tmp_path):
    with folder_lock(str(tmp_path)):
        with folder_lock(str(tmp_path)):  # the command and the engine both take it
            pass
        probe = ("import sys; from harness.engine.lock import folder_lock, FolderBusy\n"
                 "try:\n    folder_lock(sys.argv[1]).__enter__()\nexcept FolderBusy as e:\n"
                 "    print(e); sys.exit(3)\n")
        r = subprocess.run([sys.executable, "-c", probe, str(tmp_path)], cwd=ROOT, capture_output=True, text=True)
        assert r.returncode == 3 and f"pid {os.getpid()}" in r.stdout
    r = subprocess.run([sys.executable, "-c", probe, str(tmp_path)], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
