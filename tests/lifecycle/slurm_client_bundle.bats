#!/usr/bin/env bats
# lifecycle/hyperpod/build_slurm_client_bundle.sh and its use by publish_slurm_login.sh, on a fake Slurm install
# made of real ELF files (copies of this machine's `true`) and real shared libraries, so ldd and tar run for real.
# tests/e2e/test_studio_slurm_login.py builds the bundle from this machine's real Debian Slurm.

load studio_helper

BUILD="$REPO_ROOT/lifecycle/hyperpod/build_slurm_client_bundle.sh"

# fake_slurm : $T/slurm/bin (sinfo reports 23.11.10; the other commands are ELF copies of `true`) and a plugin dir
# whose auth_munge.so is a real library with a non-glibc dependency (libz's dependant, when there is one).
fake_slurm() {
  local cmd lib
  mkdir -p "$T/slurm/bin" "$T/slurm/lib/slurm"
  rm -f "$T/bin/sinfo"
  printf '#!/bin/sh\necho "slurm 23.11.10"\n' >"$T/slurm/bin/sinfo"
  chmod 755 "$T/slurm/bin/sinfo"
  for cmd in sbatch squeue scancel sacct scontrol srun munge unmunge munged; do
    cp "$(type -P true)" "$T/slurm/bin/$cmd"
  done
  # A plugin linking a non-glibc library (libssl -> libcrypto) and libslurmfull.so beside the plugins.
  lib="$(ldconfig -p | awk '$1 ~ /^libssl\.so\.[0-9]/ {print $NF; exit}')"
  [[ -n "$lib" ]] || skip "no libssl on this machine"
  cp "$lib" "$T/slurm/lib/slurm/auth_munge.so"
  cp "$(ldconfig -p | awk '$1 ~ /^libz\.so\.1/ {print $NF; exit}')" "$T/slurm/lib/slurm/libslurmfull.so"
  export PATH="$T/slurm/bin:$PATH" SLURM_BIN_DIR="$T/slurm/bin" SLURM_PLUGIN_DIR="$T/slurm/lib/slurm" SLURM_CONF="$T/slurm.conf" LOG_DIR="$T/log"
  printf 'ClusterName=ml-cluster\nSlurmctldHost=ip-10-1-0-12(10.1.0.12)\n' >"$SLURM_CONF"
}

@test "the bundle holds the commands, the plugins and their non-glibc libraries, and is reproducible" {
  fake_slurm
  run bash "$BUILD" "$T/out1"
  [ "$status" -eq 0 ]
  read -r file sha <<<"${lines[-1]}"
  [ "$file" = "$T/out1/slurm-client-23.11.10-$sha.tar.gz" ]
  [ "$(sha256sum "$file" | awk '{print $1}')" = "$sha" ]
  listing="$(tar -tzf "$file")"
  for path in VERSION INTERPRETER COMMANDS libexec/sinfo libexec/sbatch libexec/munged lib/slurm/auth_munge.so \
    lib/slurm/libslurmfull.so; do
    grep -qx "slurm-client/$path" <<<"$listing"
  done
  grep -q '^slurm-client/lib/libcrypto\.so\.' <<<"$listing"
  # glibc stays the image's own: never libc, ld-linux, libm, libpthread, libdl.
  ! grep -Eq '^slurm-client/lib/(libc|ld-linux|libm|libpthread|libdl|librt)[.-]' <<<"$listing" || false
  mkdir "$T/x" && tar -xzf "$file" -C "$T/x"
  [ "$(cat "$T/x/slurm-client/VERSION")" = 23.11.10 ]
  [[ "$(cat "$T/x/slurm-client/INTERPRETER")" == /*ld* ]]
  ! grep -qx salloc "$T/x/slurm-client/COMMANDS" || false
  [[ "$output" == *"no salloc here; the bundle goes without it"* ]]
  # Same build, same bytes: publishing again finds the same key and sha256.
  touch "$T/slurm/bin/sbatch"
  run bash "$BUILD" "$T/out2"
  [ "$status" -eq 0 ]
  [ "${lines[-1]}" = "$T/out2/slurm-client-23.11.10-$sha.tar.gz	$sha" ]
}

# ldd_reports_missing REGEX : ldd on PATH is the real one, with "libgone.so.1 => not found" added to the lines of
# every file whose path matches REGEX (as ldd reports a library this node lacks).
ldd_reports_missing() {
  export LDD_REAL LDD_MISSING="$1"
  LDD_REAL="$(type -P ldd)"
  cat >"$T/bin/ldd" <<'EOF'
#!/bin/bash
"$LDD_REAL" "$@" 2>&1 | awk '{print} $0 ~ (ENVIRON["LDD_MISSING"] ":$") {print "\tlibgone.so.1 => not found"}'
exit "${PIPESTATUS[0]}"
EOF
  chmod 755 "$T/bin/ldd"
}

@test "one ldd run: a plugin's missing library is logged and the plugin bundled, a file that is not ELF passed over" {
  fake_slurm
  printf 'not an ELF file\n' >"$T/slurm/lib/slurm/notes.so"
  ldd_reports_missing '/lib/slurm/auth_munge\.so'
  run bash "$BUILD" "$T/out"
  [ "$status" -eq 0 ]
  [[ "$output" == *"plugins whose libraries this node lacks (bundled as they are): auth_munge.so needs libgone.so.1"* ]]
  read -r file _ <<<"${lines[-1]}"
  listing="$(tar -tzf "$file")"
  grep -qx slurm-client/lib/slurm/auth_munge.so <<<"$listing"
  grep -qx slurm-client/lib/slurm/notes.so <<<"$listing"
  grep -q '^slurm-client/lib/libcrypto\.so\.' <<<"$listing"
}

@test "a client command whose library this node lacks stops the build, and so does any other ldd error" {
  fake_slurm
  ldd_reports_missing '/libexec/sbatch'
  run bash "$BUILD" "$T/out"
  [ "$status" -eq 1 ]
  [[ "$output" == *"sbatch needs libgone.so.1, which is not installed"* ]]
  cat >"$T/bin/ldd" <<'EOF'
#!/bin/bash
echo "ldd: $1: Permission denied"
exit 1
EOF
  run bash "$BUILD" "$T/out"
  [ "$status" -eq 1 ]
  [[ "$output" == *"ldd: "*"Permission denied"* ]]
  [ ! -e "$T/out" ] || [ -z "$(ls "$T/out")" ]
}

@test "a missing client command or plugin directory stops the build" {
  fake_slurm
  rm "$T/slurm/bin/sacct"
  run bash "$BUILD" "$T/out"
  [ "$status" -eq 1 ]
  [[ "$output" == *"the Slurm client command sacct is not installed"* ]]
  cp "$(type -P true)" "$T/slurm/bin/sacct"
  SLURM_PLUGIN_DIR="$T/nowhere" run bash "$BUILD" "$T/out"
  [ "$status" -eq 1 ]
  [[ "$output" == *"cannot find the Slurm plugin directory"* ]]
}

@test "publish uploads the bundle once and names it with its sha256 in the secret" {
  fake_slurm
  export MUNGE_KEY="$T/munge.key" RETRY_DELAY=0 SLURM_CLIENT_BUNDLE_S3_PREFIX="s3://lc-bucket/slurm-client/"
  : >"$STUB_SECRET"
  STUB_AWS_GET_ERROR=ResourceNotFoundException run bash "$PUBLISH" "$ARN"
  [ "$status" -eq 0 ]
  uri="$(python3 -S -c 'import json,sys; print(json.load(open(sys.argv[1]))["client_bundle"]["s3_uri"])' "$STUB_SECRET")"
  sha="$(python3 -S -c 'import json,sys; print(json.load(open(sys.argv[1]))["client_bundle"]["sha256"])' "$STUB_SECRET")"
  [ "$uri" = "s3://lc-bucket/slurm-client/slurm-client-23.11.10-$sha.tar.gz" ]
  [ "$(sha256sum "$STUB_S3_DIR/${uri##*/}" | awk '{print $1}')" = "$sha" ]
  [[ "$(calls aws)" == *"s3 cp --only-show-errors --region eu-west-1 "*" $uri"* ]]
  : >"$STUB_LOG"
  run bash "$PUBLISH" "$ARN"
  [ "$status" -eq 0 ]
  [[ "$output" == *"is already published"* && "$output" == *"nothing to publish"* ]]
  [[ "$(calls aws)" != *"s3 cp"* ]]
}

@test "publish refuses a bundle prefix that is not s3://BUCKET/PREFIX/" {
  fake_slurm
  export MUNGE_KEY="$T/munge.key"
  SLURM_CLIENT_BUNDLE_S3_PREFIX="s3://lc-bucket/slurm-client" run bash "$PUBLISH" "$ARN"
  [ "$status" -eq 1 ]
  [[ "$output" == *"SLURM_CLIENT_BUNDLE_S3_PREFIX must be s3://BUCKET/PREFIX/"* ]]
}
