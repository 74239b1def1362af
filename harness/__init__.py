"""normdiff: numerical-accuracy differential testing of normalization layers (README.md, docs/).

`harness.check(...)` (harness.api) runs cases from Python and returns their records.
"""


def __getattr__(name):
    if name == "check":  # loaded on first use: `import harness` stays light
        from harness.api import check

        return check
    raise AttributeError(f"module 'harness' has no attribute {name!r}")
