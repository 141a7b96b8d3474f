# The two commands a new machine needs: `make run` and `make test`.
# Both install what they need first: the wasm32-wasip2 target for plugins
# and the musl target for static binaries that run in containers. The
# tests also need the host's own `nft`, `tc` and `nsenter`, to check from
# outside what a network fault left in a container (Debian packages),
# schemathesis (from PyPI, pinned) to check the API against its document,
# Debian's chromium for the tests in a real headless browser, and Debian's
# adb, which the Android tests drive the device simulator through.

CARGO ?= cargo
ARGS ?=
# The API conformance test (tests/api/conformance.rs) runs schemathesis.
PYTHON ?= python3
SCHEMATHESIS_VERSION = 4.32.5

.PHONY: setup run test test-tools bench bench-backend bench-tools bench-frontend

# Idempotent: rustup does nothing when the target is installed.
setup:
	@command -v rustup >/dev/null || { echo "rustup is required (https://rustup.rs)"; exit 1; }
	rustup target add wasm32-wasip2 x86_64-unknown-linux-musl

# Serves the API on 127.0.0.1:7878 with the SQLite store in ./faultline-data.
run: setup
	$(CARGO) run --release -p faultline -- serve $(ARGS)

# The whole suite: unit tests, and end-to-end tests that build the test
# plugins and start the host themselves.
test-tools:
	@command -v nft >/dev/null && command -v tc >/dev/null && command -v nsenter >/dev/null || \
		{ apt-get update -qq && apt-get install -y -qq nftables iproute2 util-linux >/dev/null; }
	@$(PYTHON) -m schemathesis.cli --version 2>/dev/null | grep -qF '$(SCHEMATHESIS_VERSION)' || \
		$(PYTHON) -m pip install --quiet 'schemathesis==$(SCHEMATHESIS_VERSION)'
	@command -v chromium >/dev/null || \
		{ apt-get update -qq && apt-get install -y -qq chromium >/dev/null; }
	@command -v adb >/dev/null || \
		{ apt-get update -qq && apt-get install -y -qq adb >/dev/null; }

test: setup test-tools
	$(CARGO) test --workspace --exclude 'test-plugin-*' --no-fail-fast

bench: setup
	$(CARGO) bench -p faultline-tests --bench plugin_round_trip

# Backend faults on 1, 10 and 50 real containers beside raw Docker (a few minutes).
bench-backend: setup test-tools
	$(CARGO) bench -p faultline-tests --bench backend_faults

# The fault proxy beside a direct connection, nginx and HAProxy, driven by
# wrk (Debian packages; nginx-light is enough). About eight minutes.
bench-tools:
	@command -v wrk >/dev/null && { command -v nginx || test -x /usr/sbin/nginx; } >/dev/null && \
		{ command -v haproxy || test -x /usr/sbin/haproxy; } >/dev/null || \
		{ apt-get update -qq && apt-get install -y -qq wrk nginx-light haproxy >/dev/null; }

bench-frontend: setup bench-tools
	$(CARGO) bench -p faultline-tests --bench frontend_proxy
