"""What the benchmark's tests share: the implementations registered as paths, and a small layer_norm case."""
import os

import pytest

from harness import paths
from harness.benchmark import implementations
from harness.oracle.inputs import make_inputs
from harness.oracle.reference import reference
from harness.spec import CaseSpec

LN = {"pattern": "layer_norm", "shape": [4, 256], "params": {"kind": "normal"}}


@pytest.fixture(autouse=True, scope="module")
def registered():
    """The implementations as paths for a module's tests only: other tests see the registry unchanged."""
    before = os.environ.get(paths.ENV)
    yield implementations.register_all()
    if before is None:
        os.environ.pop(paths.ENV, None)
    else:
        os.environ[paths.ENV] = before


@pytest.fixture
def spec():
    """spec(**changes): a float16 layer_norm [4, 256] with normal parameters, changed as asked."""
    return lambda **changes: CaseSpec.from_dict({**LN, "dtype": "float16", **changes})


@pytest.fixture
def ref_of():
    """ref_of(spec): the FP64 reference of a spec's own inputs."""
    return lambda s: reference(s, make_inputs(s))
