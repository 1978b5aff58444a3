#!/usr/bin/env bats
# shellcheck disable=SC2016  # the scripts written below expand $HOME when they run, not here
# The Studio lifecycle-config bootstrap (constructs/studio_lifecycle_configs.py): it runs the fetched scripts only
# when every one matches the SHA-256 rendered into it. `aws s3 cp` is a stub copying from a local "bucket".

bats_require_minimum_version 1.5.0

REPO_ROOT="$(cd "$BATS_TEST_DIRNAME/../.." && pwd)"

setup_file() {
  export SHIPPED="$BATS_FILE_TMPDIR/shipped"
  mkdir -p "$SHIPPED/tools"
  # The entry point records that it ran and what it saw; a helper in a subfolder proves nested paths work.
  cat >"$SHIPPED/entry.sh" <<'SH'
echo "ran with $STUDIO_TEST_VALUE" >"$HOME/ran"
bash "$(dirname "$0")/tools/helper.sh"
SH
  echo 'echo helper >>"$HOME/ran"' >"$SHIPPED/tools/helper.sh"
  # The same scripts with the tools' studio_tools.sh, for the test of that variant. It notes whether the entry point
  # had run yet (the entry point writes $HOME/ran).
  cp -R "$SHIPPED" "$BATS_FILE_TMPDIR/shipped-tools"
  tools_script >"$BATS_FILE_TMPDIR/shipped-tools/studio_tools.sh"
  # Both variants in one Python start (rendering imports the CDK).
  JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20 "$REPO_ROOT/.venv/bin/python" "$BATS_TEST_DIRNAME/render_studio_bootstrap.py" \
    --out "$BATS_FILE_TMPDIR/bootstrap.sh" "$SHIPPED" "s3://lifecycle-bucket/studio/ml-cluster/" entry.sh plain \
    --out "$BATS_FILE_TMPDIR/bootstrap-tools.sh" "$BATS_FILE_TMPDIR/shipped-tools" \
    "s3://lifecycle-bucket/studio/ml-cluster/" entry.sh tools
}

tools_script() {
  printf '[ -e "$HOME/ran" ] && echo after >>"$HOME/tools" || echo before >>"$HOME/tools"\nexit "${TOOLS_EXIT:-0}"\n'
}

setup() {
  T="$BATS_TEST_TMPDIR"
  export HOME="$T/home" BUCKET="$T/bucket" TMPDIR="$T/tmp" AWS_LOG="$T/aws.log"
  mkdir -p "$HOME" "$TMPDIR" "$T/bin"
  cp -R "$SHIPPED" "$BUCKET"
  cat >"$T/bin/aws" <<'SH'
#!/bin/bash
echo "aws $*" >>"$AWS_LOG"
[[ "$1 $2" == "s3 cp" && "$*" == *--recursive* ]] || exit 3
cp -R "$BUCKET/." "${@: -1}"
SH
  chmod +x "$T/bin/aws"
  export PATH="$T/bin:$PATH"
}

@test "scripts that match their digests are installed and the entry point runs" {
  run bash "$BATS_FILE_TMPDIR/bootstrap.sh"
  [ "$status" -eq 0 ]
  [ "$(cat "$HOME/ran")" = "$(printf 'ran with from-bootstrap\nhelper')" ]
  cmp "$SHIPPED/tools/helper.sh" "$HOME/.studio-lifecycle/scripts/tools/helper.sh"
  grep -q "s3://lifecycle-bucket/studio/ml-cluster/" "$AWS_LOG"
}

@test "a tampered script is refused and nothing runs" {
  echo 'echo tampered >"$HOME/tampered"' >>"$BUCKET/tools/helper.sh"
  run bash "$BATS_FILE_TMPDIR/bootstrap.sh"
  [ "$status" -eq 1 ]
  [[ "$output" == *"does not match its SHA-256"* ]]
  [ ! -e "$HOME/ran" ]
  [ ! -e "$HOME/tampered" ]
  [ ! -e "$HOME/.studio-lifecycle/scripts" ]
}

@test "a tampered entry point is refused even when earlier scripts were installed" {
  run bash "$BATS_FILE_TMPDIR/bootstrap.sh"
  [ "$status" -eq 0 ]
  rm "$HOME/ran"
  echo 'echo tampered >"$HOME/tampered"' >"$BUCKET/entry.sh"
  run bash "$BATS_FILE_TMPDIR/bootstrap.sh"
  [ "$status" -eq 1 ]
  [ ! -e "$HOME/ran" ]
  [ ! -e "$HOME/tampered" ]
  cmp "$SHIPPED/entry.sh" "$HOME/.studio-lifecycle/scripts/entry.sh"  # the verified copy is untouched
}

@test "a missing script is refused and nothing runs" {
  rm "$BUCKET/tools/helper.sh"
  run bash "$BATS_FILE_TMPDIR/bootstrap.sh"
  [ "$status" -eq 1 ]
  [ ! -e "$HOME/ran" ]
}

@test "a file the digests do not list is never installed" {
  echo 'echo extra' >"$BUCKET/extra.sh"
  run bash "$BATS_FILE_TMPDIR/bootstrap.sh"
  [ "$status" -eq 0 ]
  [ ! -e "$HOME/.studio-lifecycle/scripts/extra.sh" ]
}

@test "with the tools, studio_tools.sh runs before the entry point, and its failure does not stop the space" {
  # The bucket as setup_file rendered the tools variant for (shipped-tools): the scripts and studio_tools.sh.
  tools_script >"$BUCKET/studio_tools.sh"
  run bash "$BATS_FILE_TMPDIR/bootstrap-tools.sh"
  [ "$status" -eq 0 ]
  [ "$(cat "$HOME/tools")" = before ]
  [ "$(cat "$HOME/ran")" = "$(printf 'ran with from-bootstrap\nhelper')" ]
  rm "$HOME/ran" "$HOME/tools"
  TOOLS_EXIT=1 run bash "$BATS_FILE_TMPDIR/bootstrap-tools.sh"
  [ "$status" -eq 0 ]
  [[ "$output" == *"studio-lifecycle: hyp and jq were not installed; see $HOME/.studio-tools/setup.log"* ]]
  [ "$(cat "$HOME/tools")" = before ]
  [ "$(cat "$HOME/ran")" = "$(printf 'ran with from-bootstrap\nhelper')" ]
}
