"""normdiff: numerical-accuracy differential testing of normalization layers (README.md, docs/).

`harness.check(...)` (harness.api) runs cases from Python and returns their records; `harness.check_model(...)`
every norm instance of a whole model (docs/models.md).
"""


def __getattr__(name):
    if name in ("check", "check_model"):  # loaded on first use: `import harness` stays light
        from harness import api

        return getattr(api, name)
    raise AttributeError(f"module 'harness' has no attribute {name!r}")
