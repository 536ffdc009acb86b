# Curfew: build, demo, test and benchmark. Every target installs what it needs on Debian 12 first.
SHELL := /bin/bash
SWIFT ?= swift
DEMO_STATE ?= $(CURDIR)/demo-state
export CURFEW_CATALOG_DIRS ?= $(CURDIR)/policies/apps

.PHONY: deps build release static deb demo test bench clean

# Debian packages the build and the tests need; apt runs only when one is missing (chromium renders
# the HTML report in a test; bsdutils, which is essential, gives script(1) for a terminal; uidmap gives
# newuidmap for the test of a child's user namespace; a Java runtime runs a Java game and another Java
# program in the app-identity test; fish and zsh run their completions in tests).
APT_PACKAGES := libsqlite3-dev libsystemd-dev pkg-config tzdata sqlite3 python3 dbus dbus-daemon python3-dbusmock procps passwd util-linux debootstrap systemd-container chromium uidmap nftables syncthing xvfb xfce4-panel xfconf imagemagick openjdk-17-jre-headless fish zsh
deps:
	@missing=$$(for p in $(APT_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing:" $$missing; \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get update -qq && apt-get install -y -qq --no-install-recommends $$missing; \
	fi
	@command -v $(SWIFT) >/dev/null || { echo "swift not found: put the Swift 6 toolchain on PATH (e.g. /opt/swift/usr/bin)"; exit 1; }

build: deps
	$(SWIFT) build

release: deps
	$(SWIFT) build -c release

# Sets up a local state directory, manages $(DEMO_USER) with the shipped default policy, shows the
# policy and today's schedule, then runs the agent in the foreground (Ctrl-C stops it; usage is kept).
DEMO_USER ?= demo
demo: release
	@bin=$$($(SWIFT) build -c release --show-bin-path); \
	export CURFEW_STATE_DIR=$(DEMO_STATE) CURFEW_LOG=stderr; \
	$$bin/curfew init && \
	$$bin/curfew policy import policies/default.json --user $(DEMO_USER) && \
	$$bin/curfew policy show $(DEMO_USER) && \
	$$bin/curfew schedule $(DEMO_USER) && \
	echo "starting curfewd (Ctrl-C to stop); then: CURFEW_STATE_DIR=$(DEMO_STATE) $$bin/curfew status $(DEMO_USER) --socket $(DEMO_STATE)/curfewd.sock" && \
	exec $$bin/curfewd --socket $(DEMO_STATE)/curfewd.sock

# Builds everything (no warnings allowed in this project's own code; a target that imports another of
# the package's targets without declaring it fails too, besides MemberImportVisibility, and so does one
# that imports any module it does not declare: Tests/check-imports.py) and runs every test.
test: deps
	SWIFT=$(SWIFT) python3 Tests/check-imports.py $(CURDIR)
	@$(SWIFT) build --build-tests --explicit-target-dependency-import-check error > .build-warnings.log 2>&1; status=$$?; \
	grep -v '^\[' .build-warnings.log | grep -v '^Compiling\|^Building\|^Write' || true; \
	if grep -E '^$(CURDIR)/(Sources|Tests)/.*(warning|error):|^error: Target .* without declaring it' .build-warnings.log; then \
		echo "the build has warnings or errors in this project's code"; exit 1; fi; \
	exit $$status
	@# The container tests boot Debian, which has no Swift runtime: the agent and the CLI they run there
	@# link the standard library statically, and the package test installs the .deb made of them.
	$(MAKE) --no-print-directory deb
	Tests/Container/rootfs.sh > /dev/null
	CURFEW_DEB=$$(ls $(CURDIR)/$(DEB_DIR)/curfew_*.deb) $(SWIFT) test --skip-build --parallel --num-workers 2

# curfew and curfewd with the Swift standard library linked statically, for the Debian package and the
# container tests (a scratch path of its own: `swift test` holds the lock on .build while tests run, and
# switching --static-swift-stdlib on and off would recompile every module of .build/release).
STATIC_SCRATCH := .build/container-static
# The package installs the multi-call program curfew-multicall (curfew, and curfewd as a link to it); the
# container tests also run curfewd and curfew. --gc-sections lets the linker drop unused sections; -Osize
# optimises every module for size, which keeps the package under its installed-size budget (1.3 MB less
# than -O, packaging/README.md). The same flags for all three, and in StaticCurfewBinaries (the container
# tests' own build), so one build does not recompile or relink the others'.
STATIC_FLAGS := -c release --static-swift-stdlib --scratch-path $(STATIC_SCRATCH) -Xlinker --gc-sections -Xswiftc -Osize
static: deps
	$(SWIFT) build $(STATIC_FLAGS) --product curfewd
	$(SWIFT) build $(STATIC_FLAGS) --product curfew
	$(SWIFT) build $(STATIC_FLAGS) --product curfew-multicall

# .build/deb/curfew_<version>_<arch>.deb (packaging/deb/build.sh), then lintian: errors fail the build;
# the remaining tags are overridden with the reason in packaging/deb/lintian-overrides (packaging/README.md).
DEB_APT_PACKAGES := dpkg-dev binutils python3 lintian man-db
DEB_DIR := .build/deb
deb: static
	@missing=$$(for p in $(DEB_APT_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then export DEBIAN_FRONTEND=noninteractive; apt-get update -qq && apt-get install -y -qq --no-install-recommends $$missing; fi
	@rm -f $(DEB_DIR)/curfew_*.deb
	@deb=$$(packaging/deb/build.sh $(STATIC_SCRATCH)/release $(DEB_DIR)) && ls -l $$deb && \
	lintian --fail-on error --display-info --info $$deb

# The tracking benchmark also loads Timekpr-nExT's own scanner (downloaded with apt-get download).
BENCH_APT_PACKAGES := python3-psutil python3-gi python3-dbus
bench: release
	@missing=$$(for p in $(BENCH_APT_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then export DEBIAN_FRONTEND=noninteractive; apt-get update -qq && apt-get install -y -qq --no-install-recommends $$missing; fi
	$$($(SWIFT) build -c release --show-bin-path)/curfew-bench

clean:
	rm -rf .build demo-state .build-warnings.log
