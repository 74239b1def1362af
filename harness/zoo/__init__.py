"""The zoo (docs/contracts.md §9): every norm class of a model library's modeling files, grouped by implementation
and synthesized into module specs (§8), all read from the sources with `ast`: nothing here imports the
library. Building, exporting and lifting happen only in the runner's workers (harness/engine/zoo_builds.py).

corpus (files, imports) -> classes (bases, methods) -> classify (norms, blocks) -> group (implementations)
-> configs, synth (specs) -> catalog (the zoo, cached) ; resolve (the workers) builds, exports and lifts them.
"""
