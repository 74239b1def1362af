# `make run` and `make test` each create .venv and install normdiff when needed.
# EXTRAS=ray,zoo installs those optional extras of pyproject.toml too (.ci/run does).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
EXTRAS ?=
comma  := ,
empty  :=
space  := $(empty) $(empty)
extras := $(subst $(space),,$(strip $(EXTRAS)))
# The stamp names the extras installed with it, so asking for other extras installs again; an install
# with extras also stamps the plain install and each of its extras alone (`make bench` after
# `make install EXTRAS=ray,zoo` does not install again).
STAMP  := $(VENV)/.installed-stamp$(if $(extras),-$(subst $(comma),-,$(extras)))
COVERED := $(if $(extras),$(VENV)/.installed-stamp $(foreach e,$(subst $(comma),$(space),$(extras)),$(VENV)/.installed-stamp-$(e)))
PACKAGE := .$(if $(extras),[$(extras)])
OUT    ?= reports/latest
JOBS   ?= $(shell nproc 2>/dev/null || echo 2)
HISTORY ?= reports/history.sqlite

.PHONY: install run test nightly nightly-zoo bench sweeps fuzz bugs baseline clean oracle-check

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '$(PACKAGE)'
	touch $(STAMP) $(COVERED)

# The default suite on every path; exit 1 (some verdict is not pass) still writes the reports.
run: $(STAMP)
	$(BIN)/normdiff run --suite smoke --out $(OUT) --jobs $(JOBS) || [ $$? -eq 1 ]
	@echo "reports: $(OUT)/summary.md"

test: $(STAMP)
	$(BIN)/python -m pytest -q -n $(JOBS) --dist loadgroup --durations=30 -m "not sweep"

# The checks make test makes on a few representative paths, on every other path (tests marked `sweep`).
sweeps: $(STAMP)
	$(BIN)/python -m pytest -q -n $(JOBS) --dist loadgroup -m sweep

clean:
	rm -rf $(VENV) reports/latest .pytest_cache

# The nightly, context, shapes and gradients suites (and, with the zoo extra installed, the zoo suite) on every
# path as one run (--per-suite: the workers' start paid once, every suite's structures spread over the cores),
# each suite written into reports/<suite>/ and appended to the run history $(HISTORY) (kept from night to night);
# then each suite's gate against its committed baseline (reports/baseline.json for the nightly suite,
# reports/<suite>-baseline.json for the others). The run is given the baselines too: the failures they expect
# are not attributed again every night. Every gate runs whatever the one before it says; the target fails
# when any gate does.
ZOO_RUN  = $(BIN)/normdiff run --suite zoo --out reports/zoo --jobs $(JOBS) --quiet --history $(HISTORY) $(if $(wildcard reports/zoo-baseline.json),--baseline reports/zoo-baseline.json) || [ $$? -eq 1 ]
ZOO_GATE = $(BIN)/normdiff gate reports/zoo/results.jsonl --baseline reports/zoo-baseline.json
ZOO_INSTALLED = $(BIN)/python -c "from harness.zoo.catalog import installed; raise SystemExit(not installed())"
NIGHT_SUITES = nightly context shapes gradients
NIGHT_RUN = $(BIN)/normdiff run --per-suite $(foreach s,$(NIGHT_SUITES),--suite $(s)) --out reports --jobs $(JOBS) \
	--quiet --history $(HISTORY) --baseline reports/baseline.json \
	$(foreach s,$(filter-out nightly,$(NIGHT_SUITES)),--baseline reports/$(s)-baseline.json)

nightly: $(STAMP)
	zoo=; if $(ZOO_INSTALLED); then zoo="--suite zoo --baseline reports/zoo-baseline.json"; fi; \
	$(NIGHT_RUN) $$zoo || [ $$? -eq 1 ]
	failed=0; $(BIN)/normdiff gate reports/nightly/results.jsonl --baseline reports/baseline.json || failed=1; \
	$(foreach s,$(filter-out nightly,$(NIGHT_SUITES)),$(BIN)/normdiff gate reports/$(s)/results.jsonl --baseline reports/$(s)-baseline.json || failed=1; ) \
	if $(ZOO_INSTALLED); then $(ZOO_GATE) || failed=1; fi; \
	exit $$failed

# The zoo suite on every path (the zoo extra), gated against reports/zoo-baseline.json.
nightly-zoo: $(STAMP)
	$(ZOO_RUN)
	$(ZOO_GATE)

# Naive (a process per execution) against the warm runner, side by side; limit_ratio and the fixed
# start on a cold nightly shard (harness.commands.bench_shard; minutes of its own).
bench: $(STAMP)
	$(BIN)/python -m harness.commands.bench
	@start=$$(date +%s); $(MAKE) --no-print-directory sweeps && echo "sweeps_s: $$(( $$(date +%s) - start ))"

# Random exploration (make test draws the same hypothesis examples on every run): the catalog search, then the
# program search, each at a fresh seed (printed). A failure found is a finding, a shrunk spec under
# reports/fuzz*/failures/, not a red build: exit 1 (found) passes, exit 2 (bad usage, no workers) fails.
fuzz: $(STAMP)
	$(BIN)/normdiff fuzz --paths tvm-decompose,executorch-recompose --max-examples 300 --out reports/fuzz || [ $$? -eq 1 ]
	$(BIN)/normdiff fuzz --programs --paths executorch-recompose --max-examples 300 --out reports/fuzz-programs || [ $$? -eq 1 ]

bugs: $(STAMP)
	$(BIN)/normdiff bugs --check

# After `make nightly`: rewrite the baseline from its results, keeping the reasons it had.
baseline: $(STAMP)
	$(BIN)/normdiff gate reports/nightly/results.jsonl --baseline reports/baseline.json --update
	if [ -f reports/context/results.jsonl ]; then \
	  $(BIN)/normdiff gate reports/context/results.jsonl --baseline reports/context-baseline.json --update; \
	fi
	if [ -f reports/shapes/results.jsonl ]; then \
	  $(BIN)/normdiff gate reports/shapes/results.jsonl --baseline reports/shapes-baseline.json --update; \
	fi
	if [ -f reports/gradients/results.jsonl ]; then \
	  $(BIN)/normdiff gate reports/gradients/results.jsonl --baseline reports/gradients-baseline.json --update; \
	fi
	if [ -f reports/zoo/results.jsonl ]; then \
	  $(BIN)/normdiff gate reports/zoo/results.jsonl --baseline reports/zoo-baseline.json --update; \
	fi

# The oracle's own test: correct and deliberately wrong norms, scored by normdiff and the anchors' oracles.
oracle-check: $(STAMP)
	$(BIN)/python -m harness.benchmark.bench
