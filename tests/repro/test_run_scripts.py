"""Many scripts in one fresh interpreter (harness/repro/run_scripts.py): each exits as `python SCRIPT` would.

Tiny scripts of every ending a repro script has (passing, failing by exit code, raising, printing) and the two
that end an interpreter (a crash, a hang): each gets its own code and output, and the scripts after them still
run.
"""
from __future__ import annotations

from harness.repro.run_scripts import TIMED_OUT, run_scripts

SCRIPTS = {
    "ok": "print('fine')\n",
    "fails": "print('bad rows')\nraise SystemExit(1)\n",
    "raises": "raise ValueError('the path raised')\n",
    "main": "import sys\nif __name__ == '__main__':\n    print('as __main__', sys.argv is not None)\n    sys.exit(0)\n",
    "crash": "import os\nos.abort()\n",
    "hang": "import time\ntime.sleep(60)\n",
    "after": "print('still run')\n",
}


def test_each_script_gets_its_own_exit_code_and_output(tmp_path):
    names = {}
    for name, text in SCRIPTS.items():
        names[name] = str(tmp_path / f"{name}-script.py")  # a hyphen: no import can mean it
        (tmp_path / f"{name}-script.py").write_text(text, encoding="utf-8")
    ran = run_scripts(list(names.values()), jobs=1, timeout=3.0)
    code = {name: ran[path].code for name, path in names.items()}
    assert code["ok"] == 0 and code["fails"] == 1 and code["raises"] == 1 and code["main"] == 0
    assert code["crash"] < 0 and code["hang"] == TIMED_OUT and code["after"] == 0
    assert ran[names["fails"]].output == "bad rows\n" and "ValueError: the path raised" in ran[names["raises"]].output
    assert "as __main__ True" in ran[names["main"]].output and ran[names["after"]].output == "still run\n"


def test_two_jobs_run_every_script_once(tmp_path):
    paths = []
    for k in range(5):
        paths.append(str(tmp_path / f"s{k}-script.py"))
        (tmp_path / f"s{k}-script.py").write_text(f"raise SystemExit({k % 2})\n", encoding="utf-8")
    ran = run_scripts(paths, jobs=2)
    assert {p: r.code for p, r in ran.items()} == {p: k % 2 for k, p in enumerate(paths)}
