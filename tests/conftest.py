import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def normdiff(*args, cwd=None, timeout=900, env=None):
    """Run the real command line in a fresh interpreter, as a user would."""
    full_env = dict(os.environ, **(env or {}))
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=cwd or ROOT,
                          capture_output=True, text=True, timeout=timeout, env=full_env)


@pytest.fixture
def cli():
    return normdiff
