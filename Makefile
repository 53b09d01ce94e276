# The front door: `make test` sets everything up on a fresh machine (Python 3.11 + Java 17) and
# runs lint, the type checker and the whole suite; `make demo` tells the failover story;
# `make chaos` drives seeded faults into a real ZooKeeper ensemble (CHAOS_RUNS, CHAOS_SEED);
# `make upgrade-test` runs the previous release and this code in one fleet.

PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
PYTEST_ARGS ?=
# Four test processes (pytest-xdist), a file each at a time: most tests wait on sessions and
# processes, not on the CPU. PYTEST_WORKERS=0 runs them in this process.
PYTEST_WORKERS ?= 4
CHAOS_RUNS ?= 20
CHAOS_SEED ?=
# Every target's Python processes cache their bytecode in the virtual environment, whatever the
# shell says: with PYTHONDONTWRITEBYTECODE set (as in this machine's environment) every daemon,
# fork server, driver, script and test process compiled each module of zkstore and recovery it
# imported, and pytest rewrote every test module's asserts, at each start (the suite's phases
# did not; the demo, the upgrade test, chaos and the benchmarks did, which also made every
# benchmarked command about 50% dearer than a user's). The prefix keeps every cache out of the
# tree (and out of the directories whose modules jobs ship).
export PYTHONDONTWRITEBYTECODE :=
export PYTHONPYCACHEPREFIX := $(abspath $(VENV))/pycache

.PHONY: test test-deep test-fast test-soak test-credentials demo lint typecheck pytest spark-archive zookeeper-archive bench bench-smoke chaos venv clean \
	browser-test import-graph upgrade-test transcripts transcripts-check

venv: $(STAMP)

$(STAMP): setup.cfg pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[test,s3]'
	touch $(STAMP)

lint: $(STAMP)
	.ci/timed ruff $(BIN)/ruff check zkstore recovery zkstore_dev tests benchmarks examples
	.ci/timed ruff-format $(BIN)/ruff format --check zkstore recovery zkstore_dev tests benchmarks examples
	.ci/timed import-contracts $(BIN)/lint-imports --no-cache

typecheck: $(STAMP)
	.ci/timed mypy $(BIN)/mypy

# The suite's Spark JVMs map Spark's classes from an archive made once per virtual environment
# (tests/spark_jvm.py: about half of a small job's start), and its ZooKeeper servers theirs
# (tests/zk_jvm.py: about half of a server's start); made beside lint and the type checker.
pytest: $(STAMP) spark-archive zookeeper-archive
	.ci/timed pytest $(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder --save-durations $(PYTEST_ARGS)

spark-archive: $(STAMP)
	.ci/timed spark-archive $(BIN)/python -m tests.spark_jvm

zookeeper-archive: $(STAMP)
	.ci/timed zookeeper-archive $(BIN)/python -m tests.zk_jvm

# lint, the type checker and the suite at once (the suite waits more than it computes); each
# line of output is printed whole as it comes, and any failure fails the test.
test: $(STAMP)
	$(MAKE) --no-print-directory -j3 --output-sync=line lint typecheck pytest

# The property tests at their full number of examples (make test runs a quarter of them);
# .ci/run runs this after make test.
test-deep: $(STAMP)
	ZKSTORE_DEEP=1 $(BIN)/python -m pytest -q -n 2 --dist loadfile -m property $(PYTEST_ARGS)

# The package graph (the module cycles, none, and each package's imports): docs/design.md's layers.
import-graph: $(STAMP)
	$(BIN)/python .ci/import-graph

# The runtime's end-to-end flows again with ZooKeeper credentials, where every driver holds
# its own job's identity (zkstore/zookeeper/identity.py): checkpoints, artifacts, control, heartbeats,
# schedules, adoption. .ci/run runs this after make test.
CREDENTIAL_TESTS ?= tests/artifacts/test_artifacts_runtime.py tests/control/test_control_running_jobs.py \
	tests/drivers/test_restart_adoption.py tests/lifecycle/test_runtime.py tests/lifecycle/test_attempt_timeouts.py \
	tests/lifecycle/test_hung_drivers.py tests/schedules/test_schedules_journey.py
test-credentials: $(STAMP)
	ZKSTORE_TEST_CREDENTIALS=1 $(BIN)/python -m pytest -q -n 2 --dist loadfile $(CREDENTIAL_TESTS)

# The unit tests (pure code) of every concern that the last saved run timed under a second and
# its in-process ones (integration: real servers, no daemon) under 0.3 s, no property
# (tests/durations.py FAST_LIMIT): within a minute, for the edit-test loop.
# PYTEST_ARGS=tests/schedules keeps to one concern.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 -m "unit or integration" --fast $(PYTEST_ARGS)

# The suite again and again while two busy loops load the CPU: SOAK_RUNS full runs must all pass.
SOAK_RUNS ?= 5
test-soak: $(STAMP)
	.ci/soak $(SOAK_RUNS)

# The status page in a real browser (Debian's chromium, installed here if missing; needs root or
# an existing chromium). Not part of `make test`. SCREENSHOT=docs/status-page.png keeps the shots
# (the job page's beside it: docs/job-page.png).
browser-test: $(STAMP)
	command -v chromium >/dev/null || (apt-get update && apt-get install -y chromium)
	ZKSTORE_SCREENSHOT=$(SCREENSHOT) $(BIN)/python -m pytest -q -p no:xdist -m browser \
		-o addopts="" tests/http/test_browser.py

demo: $(STAMP)
	$(BIN)/zkstore demo

bench: $(STAMP)
	$(BIN)/python -m benchmarks

# Every benchmark at a tiny size (seconds each): a broken benchmark is caught by CI at once.
bench-smoke: $(STAMP)
	$(BIN)/python -m benchmarks --smoke

chaos: $(STAMP)
	$(BIN)/python -m zkstore_dev.chaos --runs $(CHAOS_RUNS) $(if $(CHAOS_SEED),--seed $(CHAOS_SEED))

# The previous release (CHANGELOG.md, built once under .upgrade/) and this code in one fleet:
# upgraded one daemon at a time with jobs running, back, and again (docs/testing.md).
upgrade-test: $(STAMP)
	$(BIN)/python -m zkstore_dev.upgrade

# The docs' real sessions (docs/sessions/*.sh) run again into the blocks the pages mark, against
# an embedded ZooKeeper (a few minutes: one runs a Spark pipeline); commit what changed.
# transcripts-check runs nothing: a block that does not show its session's commands fails.
transcripts: $(STAMP)
	$(BIN)/python -m zkstore_dev.transcript

transcripts-check: $(STAMP)
	$(BIN)/python -m zkstore_dev.transcript --check

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache .upgrade
