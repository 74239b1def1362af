"""The worker processes' memory limit: a share of the machine, at least 2 GB, and the hint a killed worker gets."""
import os

import pytest

from harness.engine.procs import Procs, default_max_memory_gb


def test_the_default_limit_is_a_share_of_the_machine_and_at_least_two_gb():
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    assert default_max_memory_gb(1) == pytest.approx(max(2.0, 0.6 * total), abs=0.06)
    assert default_max_memory_gb(1000) == 2.0
    procs = Procs(["eager"], 5.0, max_memory=4)
    try:  # a worker killed outright (the kernel's OOM killer) says the limit may be why
        assert "memory limit of 4 GB" in procs._memory_hint(-9, [])
        assert "memory limit of 4 GB" in procs._memory_hint(-6, ["terminate called after throwing std::bad_alloc"])
        assert procs._memory_hint(-6, ["Fatal Python error: Aborted"]) == ""
    finally:
        procs.close([])
