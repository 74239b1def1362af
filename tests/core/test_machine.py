"""harness.core.machine: the CPU features a record names."""
from harness.core.machine import FEATURES, cpu_features, features_of

SAPPHIRE_RAPIDS = ("processor\t: 0\nvendor_id\t: GenuineIntel\n"
                   "flags\t\t: fpu sse2 f16c fma avx2 avx512f avx512_bf16 avx512_fp16 amx_bf16 amx_tile\n"
                   "processor\t: 1\nflags\t\t: fpu\n")
NEOVERSE = "processor\t: 0\nFeatures\t: fp asimd fphp asimdhp bf16 sve sve2 i8mm\n"


def test_features_are_read_from_the_first_cpu_in_one_fixed_order():
    assert features_of(SAPPHIRE_RAPIDS) == ("f16c", "fma", "avx2", "avx512f", "avx512_bf16", "avx512_fp16",
                                            "amx_bf16")
    assert features_of(NEOVERSE) == ("fphp", "asimdhp", "bf16", "sve", "sve2")
    assert features_of("processor: 0\n") == ()


def test_this_machine_names_only_known_features_and_the_same_each_time():
    here = cpu_features()
    assert here is None or set(here) <= set(FEATURES)
    assert cpu_features() == here
