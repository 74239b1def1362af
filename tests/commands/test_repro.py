"""`normdiff repro` (harness/commands/repro.py): what it refuses in one line, exit 2."""
from __future__ import annotations

import json

from helpers import normdiff_here


def test_a_module_cases_gradient_script_is_refused_in_one_line(tmp_path):
    spec = tmp_path / "grad.json"
    spec.write_text(json.dumps({"pattern": "rms_norm", "class": "user_norms:LlamaRMSNorm", "init": {"hidden_size": 16},
                                "dtype": "float16", "shape": [2, 16], "grad": True}))
    for extra in ((), ("--report",)):
        done = normdiff_here("repro", str(spec), "--path", "eager", *extra, cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        assert "gradient script is not written yet" in done.stderr and len(done.stderr.strip().splitlines()) == 1
