"""The workers' memory limit: a share of the machine, at least 2 GB; what a refused allocation looks like."""
import os

import numpy as np
import pytest

from harness.core.memory import default_max_memory_gb, is_out_of_memory, memory_note


def test_the_default_limit_is_a_share_of_the_machine_and_at_least_two_gb():
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    assert default_max_memory_gb(1) == pytest.approx(max(2.0, 0.6 * total), abs=0.06)
    assert default_max_memory_gb(1000) == 2.0


def test_a_refused_allocation_is_told_from_a_bad_argument():
    try:  # numpy's own refusal: far past any machine's memory
        np.empty(2**62, dtype=np.uint8)
    except MemoryError as exc:
        assert is_out_of_memory(exc)
    assert is_out_of_memory(RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 8 TB"))
    assert not is_out_of_memory(TypeError("__init__() got an unexpected keyword argument 'size'"))
    assert memory_note(3 * 2**30) == "over the worker memory limit of 3 GB (--max-memory)"
