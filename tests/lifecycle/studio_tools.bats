#!/usr/bin/env bats
# lifecycle/studio/studio_tools.sh offline: a bundle laid out as tools/build_studio_tools.py writes it, in a local
# directory (STUDIO_TOOLS_SOURCE_DIR) instead of S3. Its hyp is a small wheel made here, its jq a script and its pip
# Debian's own pip wheel (python3-pip-whl, which python3-venv needs), pinned like the real bundle pins its pip (the
# real bundle is installed by tests/test_studio_tools.py). Runs as an unprivileged user, as Studio runs it.

bats_require_minimum_version 1.5.0

LCC="$BATS_TEST_DIRNAME/../../lifecycle/studio/studio_tools.sh"
USER_NAME=studiotools-user
USER_ID=64301
H="/home/$USER_NAME"
PYTHON=/usr/bin/python3 # Debian's (python3-venv): the user cannot run a Python under /root
PIP_WHEELS=(/usr/share/python-wheels/pip-*-py3-none-any.whl)
PIP_WHEEL="${PIP_WHEELS[0]}"
PIP_VERSION="${PIP_WHEEL##*/pip-}" # bash reads this file again for every test: no process for what it can cut itself
PIP_VERSION="${PIP_VERSION%%-*}"

setup_file() {
  # One space user and one home for every test of the file: under `bats --jobs` they must not run side by side.
  export BATS_NO_PARALLELIZE_WITHIN_FILE=true
  # The wheel tag of $PYTHON, asked once for the file (the tests see it in the environment).
  TAG="$("$PYTHON" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')"
  export TAG
  # Fixed ids outside those the e2e tests give their users (alice 10001, bob 10002, ...), which run at the same time:
  # useradd's next free uid would be one of theirs.
  if ! id "$USER_NAME" >/dev/null 2>&1; then
    groupadd --gid "$USER_ID" "$USER_NAME"
    useradd --uid "$USER_ID" --gid "$USER_ID" --create-home --home-dir "/home/$USER_NAME" --shell /bin/bash "$USER_NAME"
  fi
  # One bundle for the file (each test works on its own copy, so all have the same SHA256SUMS), and its first
  # install, made once: the two tests that start from it restore a copy of the home it left (first_install). A venv
  # is most of a test's CPU (the bundle's pip installs and byte-compiles itself into it).
  FILE_T="$(mktemp -d /tmp/studio-tools-bats-file.XXXXXX)"
  export FILE_T
  chmod 0755 "$FILE_T"
  make_bundle "$FILE_T/bundle"
  H="/home/$USER_NAME" BUNDLE="$FILE_T/bundle"
  find "$H" -mindepth 1 -delete
  status=0
  as_user bash "$LCC" >"$FILE_T/first.out" 2>&1 || status=$?
  echo "$status" >"$FILE_T/first.status"
  # Moved out, not copied and then deleted by the first test's setup (see first_install).
  mkdir "$FILE_T/first-home"
  find "$H" -mindepth 1 -maxdepth 1 -exec mv -t "$FILE_T/first-home/" {} +
}

teardown_file() {
  rm -rf "$FILE_T"
  userdel --remove "$USER_NAME" 2>/dev/null || true
  groupdel "$USER_NAME" 2>/dev/null || true
}

# first_install : the home as the file's first install left it, and that run's status and output. Copied beside the
# test's bundle, then renamed into the home: ext4 makes each file created in /home soon after many were deleted there
# look for an inode not freed recently (~1 s of system time for the ~1,100 files of the venv); a rename creates none.
first_install() {
  find "$H" -mindepth 1 -delete
  cp -a "$FILE_T/first-home" "$T/first-home"
  find "$T/first-home" -mindepth 1 -maxdepth 1 -exec mv -t "$H/" {} +
  status="$(cat "$FILE_T/first.status")"
  output="$(cat "$FILE_T/first.out")"
}

# as_user CMD... : CMD as the space's user, with its own HOME and the test's settings.
as_user() {
  setpriv --reuid="$USER_NAME" --regid="$USER_NAME" --init-groups env -i HOME="$H" PATH="/usr/bin:/bin" \
    STUDIO_TOOLS_SOURCE_DIR="$BUNDLE" STUDIO_TOOLS_SHA256="${STUDIO_TOOLS_SHA256-$(sha "$BUNDLE/SHA256SUMS")}" \
    STUDIO_TOOLS_FOREGROUND=1 STUDIO_TOOLS_PYTHON="$PYTHON" "$@"
}

sha() { sha256sum "$1" | cut -d' ' -f1; }

# make_wheel DIR : a wheel of a distribution "sagemaker-hyperpod" 0.0.1 whose console script hyp prints a line.
make_wheel() {
  "$PYTHON" - "$1" <<'EOF'
import base64, hashlib, sys, zipfile
dist = "sagemaker_hyperpod-0.0.1"
files = {
    "hyp_stand_in.py": "def cli():\n    print('hyp stand-in: --help')\n",
    f"{dist}.dist-info/METADATA": "Metadata-Version: 2.1\nName: sagemaker-hyperpod\nVersion: 0.0.1\n",
    f"{dist}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    f"{dist}.dist-info/entry_points.txt": "[console_scripts]\nhyp = hyp_stand_in:cli\n",
}
record = "".join(f"{n},sha256={base64.urlsafe_b64encode(hashlib.sha256(c.encode()).digest()).rstrip(b'=').decode()},{len(c)}\n"
                 for n, c in files.items()) + f"{dist}.dist-info/RECORD,,\n"
with zipfile.ZipFile(f"{sys.argv[1]}/{dist}-py3-none-any.whl", "w") as z:
    for n, c in files.items():
        z.writestr(n, c)
    z.writestr(f"{dist}.dist-info/RECORD", record)
EOF
}

# make_bundle DIR : a bundle laid out as the real one, with the stand-in wheel for this Python, the pip wheel that
# installs it (pinned in the requirements file as tools/build_studio_tools.py pins it) and a jq script.
make_bundle() {
  local bundle=$1 wheel
  mkdir -p "$bundle/hyp/wheels" "$bundle/jq"
  printf '#!/bin/sh\necho "jq stand-in $*"\n' >"$bundle/jq/jq"
  make_wheel "$bundle/hyp/wheels"
  wheel=("$bundle"/hyp/wheels/sagemaker_hyperpod-*.whl)
  cp "$PIP_WHEEL" "$bundle/hyp/wheels/"
  {
    echo "pip==$PIP_VERSION --hash=sha256:$(sha "$PIP_WHEEL")"
    echo "sagemaker-hyperpod==0.0.1 --hash=sha256:$(sha "${wheel[0]}")"
  } >"$bundle/hyp/requirements-$TAG.txt"
  write_sums "$bundle"
  chmod -R a+rX "$bundle"
}

# write_sums DIR : SHA256SUMS of the bundle in DIR as it is now (after a test altered it).
write_sums() {
  (cd "$1" && find . -type f ! -name SHA256SUMS | sed 's|^\./||' | sort | xargs sha256sum >SHA256SUMS)
}

# refused_before_a_venv MESSAGE : the space's LCC fails naming MESSAGE, having made no hyp venv and installed no hyp.
refused_before_a_venv() {
  run as_user bash "$LCC"
  [ "$status" -eq 1 ]
  [[ "$output" == *"$1"* ]]
  [ -z "$(find "$H/.studio-tools" -maxdepth 1 -name 'hyp-*')" ]
  [ ! -e "$H/.local/bin/hyp" ]
}

setup() {
  # Outside bats' own temp dirs, which only root may traverse: the space's user reads the bundle.
  T="$(mktemp -d /tmp/studio-tools-bats.XXXXXX)"
  chmod 0755 "$T"
  find "$H" -mindepth 1 -delete
  BUNDLE="$T/bundle"
  cp -a "$FILE_T/bundle" "$BUNDLE"
}

teardown() {
  rm -rf "$T"
}

@test "installs jq and hyp for the space's user, owned by that user, and puts ~/.local/bin on PATH" {
  first_install # as_user bash "$LCC", run once for the file
  [ "$status" -eq 0 ]
  [[ "$output" == *"/bin/hyp --help runs: hyp stand-in: --help"* ]]
  cmp "$BUNDLE/jq/jq" "$H/.local/bin/jq"
  [ "$(stat -c %U "$H/.local/bin/jq")" = "$USER_NAME" ]
  [ -z "$(find "$H" ! -user "$USER_NAME")" ]
  [[ "$(readlink "$H/.local/bin/hyp")" == "$H/.studio-tools/hyp-"*"-$TAG/bin/hyp" ]]
  # The venv was made without ensurepip (whose pip and, for Debian's 3.11, setuptools would be there too): it holds
  # what the requirements name, the bundle's pip among them, and nothing else.
  venv="$(dirname "$(dirname "$(readlink "$H/.local/bin/hyp")")")"
  [ "$(cd "$venv"/lib/python3*/site-packages && echo *.dist-info)" = "pip-$PIP_VERSION.dist-info sagemaker_hyperpod-0.0.1.dist-info" ]
  run as_user bash -c "source ~/.bashrc; hyp; jq -c ."
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "hyp stand-in: --help" ]
  [ "${lines[1]}" = "jq stand-in -c ." ]
}

@test "a second start changes nothing and copies nothing" {
  first_install # as_user bash "$LCC", run once for the file
  [ "$status" -eq 0 ]
  before="$(stat -c %Y:%i "$H/.local/bin/jq" "$(readlink "$H/.local/bin/hyp")")"
  rm -rf "$BUNDLE/hyp"  # a second start that copied the bundle would now fail
  run as_user bash "$LCC"
  [ "$status" -eq 0 ]
  [[ "$output" == *"nothing changed"* ]]
  # Its log lines carry the UTC time, as `date -u +%Y-%m-%dT%H:%M:%SZ` prints it.
  [[ "$output" =~ (^|$'\n')[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z\ \[studio-tools\]\ nothing\ changed ]]
  [ "$(stat -c %Y:%i "$H/.local/bin/jq" "$(readlink "$H/.local/bin/hyp")")" = "$before" ]
  [ "$(grep -c "studio-tools:" "$H/.bashrc")" -eq 1 ]
}

@test "a SHA256SUMS that is not the one in the lifecycle config installs nothing" {
  expected="$(printf '0%.0s' $(seq 64))"
  STUDIO_TOOLS_SHA256="$expected" run as_user bash "$LCC"
  [ "$status" -eq 1 ]
  [[ "$output" == *"checksum mismatch for SHA256SUMS: expected sha256 $expected, actual $(sha "$BUNDLE/SHA256SUMS"); installing nothing"* ]]
  [ ! -e "$H/.local/bin/jq" ]
  [ ! -e "$H/.local/bin/hyp" ]
}

@test "a tampered file of the bundle installs nothing, though SHA256SUMS itself is intact" {
  echo "# tampered" >>"$BUNDLE/jq/jq"
  run as_user bash "$LCC"
  [ "$status" -eq 1 ]
  [[ "$output" == *"jq/jq: FAILED"* ]]
  [[ "$output" == *"a file of the bundle does not match its sha256 in SHA256SUMS; installing nothing"* ]]
  [ ! -e "$H/.local/bin/jq" ]
  [ ! -e "$H/.local/bin/hyp" ]
}

@test "a wheel swapped for another is refused by pip's hash check and nothing is linked" {
  # SHA256SUMS recomputed: the requirements' own hashes must still catch it.
  make_wheel "$T" && "$PYTHON" -c "
import zipfile, sys
src, dst = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(src) as a, zipfile.ZipFile(dst, 'w') as b:
    for n in a.namelist():
        b.writestr(n, a.read(n).replace(b'stand-in', b'swapped!'))
" "$T"/sagemaker_hyperpod-0.0.1-py3-none-any.whl "$BUNDLE"/hyp/wheels/sagemaker_hyperpod-0.0.1-py3-none-any.whl
  write_sums "$BUNDLE"
  run as_user bash "$LCC"
  [ "$status" -eq 1 ]
  [[ "$output" == *"DO NOT MATCH THE HASHES"* ]]
  [[ "$output" == *"pip could not install hyp from the bundle"* ]]
  [ ! -e "$H/.local/bin/hyp" ]
}

@test "a bundle without the pip wheel its requirements pin is refused before a venv is made" {
  rm "$BUNDLE/hyp/wheels/$(basename "$PIP_WHEEL")"
  write_sums "$BUNDLE"
  refused_before_a_venv "the bundle has no single pip-$PIP_VERSION wheel in hyp/wheels, which requirements-$TAG.txt pins; installing nothing"
}

@test "requirements that pin no pip are refused: the image's pip never installs" {
  sed -i '/^pip==/d' "$BUNDLE/hyp/requirements-$TAG.txt"
  write_sums "$BUNDLE"
  refused_before_a_venv "requirements-$TAG.txt pins pip 0 times, not once"
}

@test "a pip wheel swapped for another is refused before it runs" {
  cp "$BUNDLE/hyp/wheels/sagemaker_hyperpod-0.0.1-py3-none-any.whl" "$BUNDLE/hyp/wheels/$(basename "$PIP_WHEEL")"
  write_sums "$BUNDLE"
  run as_user bash "$LCC"
  [ "$status" -eq 1 ]
  [[ "$output" == *"$(basename "$PIP_WHEEL") does not have the sha256 requirements-$TAG.txt pins; installing nothing"* ]]
  [ ! -e "$H/.local/bin/hyp" ]
}

@test "a Python the bundle has no wheels for is named with the ones it has" {
  mv "$BUNDLE/hyp/requirements-$TAG.txt" "$BUNDLE/hyp/requirements-cp39.txt"
  write_sums "$BUNDLE"
  run as_user bash "$LCC"
  [ "$status" -eq 1 ]
  [[ "$output" == *"the bundle has no hyp wheels for $TAG ($PYTHON); it has them for: cp39"* ]]
}

@test "root refuses to install into a home it does not own, and writes nothing there" {
  run env -i HOME="$H" PATH=/usr/bin:/bin STUDIO_TOOLS_SOURCE_DIR="$BUNDLE" \
    STUDIO_TOOLS_SHA256="$(sha "$BUNDLE/SHA256SUMS")" STUDIO_TOOLS_FOREGROUND=1 bash "$LCC"
  [ "$status" -eq 1 ]
  [[ "$output" == *"$H belongs to uid $(id -u "$USER_NAME"), not to uid 0 running this; run it as the space's user"* ]]
  [ -z "$(find "$H" -mindepth 1)" ]
}

@test "a ~/.local/bin planted as a symbolic link is not followed" {
  mkdir -p "$T/elsewhere"
  chown "$USER_NAME" "$T/elsewhere"
  as_user mkdir -p "$H/.local"
  as_user ln -s "$T/elsewhere" "$H/.local/bin"
  run as_user bash "$LCC"
  [ "$status" -eq 1 ]
  [[ "$output" == *"$H/.local/bin is a symbolic link; refusing to install through it"* ]]
  [ -z "$(ls -A "$T/elsewhere")" ]
}

@test "without the settings from the bootstrap it says which are missing" {
  run env -i HOME="$H" PATH=/usr/bin:/bin STUDIO_TOOLS_FOREGROUND=1 setpriv --reuid="$USER_NAME" \
    --regid="$USER_NAME" --init-groups bash "$LCC"
  [ "$status" -eq 1 ]
  [[ "$output" == *"STUDIO_TOOLS_S3_URI='' is not an s3:// URI; STUDIO_TOOLS_SHA256='' is not a sha256 digest"* ]]
}
