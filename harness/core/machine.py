"""The CPU features a result can depend on, as each record says them (key "cpu").

Why: a compiled norm's kernels are picked at run time by the CPU's features.
XNNPACK's float16 GEMM sums in float16 where the CPU has native float16
arithmetic (x86's AVX512-FP16, Arm's FP16 SIMD) and in float32 elsewhere, so
the same case, path and versions pass on one machine and are `inaccurate` on
another. A record names the features of its machine, and a baseline entry
may name the features its failure needs (harness.reports.baseline).
"""
from __future__ import annotations

import functools

# The features that change which arithmetic a path's kernels use: half/bfloat16 conversion and arithmetic,
# fused multiply-add, the vector widths kernels are picked by, and the matrix units. Names as Linux's
# /proc/cpuinfo spells them (x86 "flags", Arm "Features").
FEATURES: tuple[str, ...] = (
    "f16c", "fma", "avx2", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_fp16",  # x86
    "fphp", "asimdhp", "bf16", "sve", "sve2", "sme",  # Arm
)
CPUINFO = "/proc/cpuinfo"


def features_of(cpuinfo: str) -> tuple[str, ...]:
    """The FEATURES a /proc/cpuinfo text lists for its first CPU, in FEATURES' order."""
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() in ("flags", "Features"):
            present = set(value.split())
            return tuple(f for f in FEATURES if f in present)
    return ()


@functools.cache
def cpu_features() -> tuple[str, ...] | None:
    """This machine's FEATURES, or None where /proc/cpuinfo cannot be read (not Linux): unknown, not none."""
    try:
        with open(CPUINFO, encoding="utf-8", errors="replace") as fh:
            return features_of(fh.read())
    except OSError:
        return None
