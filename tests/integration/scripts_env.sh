#!/bin/bash
# scripts/env, as the guide has a user source it after the build: every tool of the build is
# found on PATH (from any directory), sourcing twice does not grow PATH, and a missing build
# says what to do and fails without changing PATH.
set -euo pipefail
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
env_script=$RAILYARD_SOURCE_DIR/scripts/env
cd /
out=$(PATH=/usr/bin:/bin bash -c "source '$env_script' '$RAILYARD_BUILD_DIR' >/dev/null && source '$env_script' '$RAILYARD_BUILD_DIR' >/dev/null &&
  for t in railyard-train railyard-data railyard-report railyard-ckpt railyard-topo; do command -v \$t; done; echo \"PATH=\$PATH\"")
for t in railyard-train railyard-data railyard-report railyard-ckpt; do
  grep -qx "$RAILYARD_BUILD_DIR/runtime/tools/$t" <<<"$out" || fail "$t not found from the build: $out"
done
grep -qx "$RAILYARD_BUILD_DIR/plugin/railyard-topo" <<<"$out" || fail "railyard-topo not found: $out"
[[ $(grep -o "$RAILYARD_BUILD_DIR/runtime/tools" <<<"$(grep '^PATH=' <<<"$out")" | wc -l) == 1 ]] ||
  fail "sourcing twice added the build twice: $(grep '^PATH=' <<<"$out")"
set +e
msg=$(PATH=/usr/bin:/bin bash -c "source '$env_script' /nonexistent; echo \"rc=\$? PATH=\$PATH\"" 2>&1)
set -e
grep -q "no railyard-train in /nonexistent/runtime/tools; build first" <<<"$msg" || fail "missing build: $msg"
grep -q "rc=1 PATH=/usr/bin:/bin$" <<<"$msg" || fail "missing build: not rc 1 with PATH unchanged: $msg"
echo "scripts_env: ok"
