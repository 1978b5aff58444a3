# shellcheck shell=bash
# shellcheck disable=SC2030,SC2031 # make_template lays its node out in a subshell with a T of its own, on purpose
# Shared setup: every system command is a stub on PATH and every system path is in a temp dir,
# so the scripts can run as root in CI without touching the machine.

REPO_ROOT="$(cd "$BATS_TEST_DIRNAME/../.." && pwd)"
# shellcheck disable=SC2034  # SCRIPTS and FIXTURES are used by the .bats files that load this
SCRIPTS="$REPO_ROOT/lifecycle/hyperpod"
FIXTURES="$BATS_TEST_DIRNAME/fixtures"

STUBBED=(hostname mount umount mountpoint findmnt getent groupadd useradd usermod userdel systemctl scontrol
  apt-get apt-mark dpkg-query aws visudo srun ssh-keygen lctl nproc iptables ip6tables sinfo setpriv)

# The directory every test starts from, made once per bats run in $BATS_SUITE_TMPDIR/lifecycle-template (the same for
# every file that loads this helper: nothing in it depends on the file): the stub links, the fake root's files, the
# empty directories, the parameters, and the node ami_node lays out for a controller. setup() copies it in one cp,
# instead of making each piece with a command of its own and starting ami_model.py, the costliest part, for every test.
# The template is made in a directory of its own name (recorded in `origin`); the files that name it (`fix-files`) and
# the links into it (`fix-links`) get the test's directory instead after the copy. No test writes into it.
# Files (and a file's tests) run in parallel (bats --jobs): the first tests to get here each make one and rename it into
# place; a rename onto one another test made first fails, and that copy is thrown away.
make_template() {
  local tmpl="$BATS_SUITE_TMPDIR/lifecycle-template" new="$BATS_SUITE_TMPDIR/lifecycle-template.$BASHPID" cmd
  [[ -d "$tmpl" ]] && return 0
  # Work the scripts do as a user (setpriv, lib/user_paths.sh) really runs under that uid: it must reach the test's
  # directory (bats makes its run directory 0700) and record its stub calls.
  chmod 0711 "$BATS_RUN_TMPDIR"
  mkdir -p "$new/t/bin" "$new/t/fake/dpkg" "$new/t/s3" "$new/t/skel" "$new/t/tmp" "$new/t/slurm/etc"
  for cmd in "${STUBBED[@]}"; do
    ln -s "$BATS_TEST_DIRNAME/stubs/stub" "$new/t/bin/$cmd"
  done
  : >"$new/t/calls.log"
  chmod 0666 "$new/t/calls.log"
  : >"$new/t/fake/mounts"
  printf 'root:x:0:0:root:/root:/bin/bash\nubuntu:x:1000:1000::/home/ubuntu:/bin/bash\n' >"$new/t/fake/passwd"
  printf 'root:x:0:\nubuntu:x:1000:\n' >"$new/t/fake/group"
  printf 'MemTotal:        7836724 kB\nMemFree:         1000000 kB\n' >"$new/t/meminfo"
  echo "# skeleton profile" >"$new/t/skel/.profile"
  (
    T="$new/t"
    node_env
    # The node as lifecycle/node_contract.json says HyperPod leaves a controller before OnInitComplete
    # (tests/lifecycle/ami_model.py): its slurm.conf, plugstack.conf, resource_config.json, enroot, pyxis, Docker,
    # Slurm's log rotation, the NVMe and EBS mounts. FSx is left out: these parameters (fsx.mount: true) have the
    # lifecycle script mount it, which is what they are for when HyperPod does not.
    ami_node controller --absent fsx-mounted
    cp "$FIXTURES/platform_parameters.json" "$PARAMS_FILE"
    set_param fsx.mount_path "\"$T/fsx\""
  )
  echo "$new/t" >"$new/origin"
  grep -rlF -- "$new/t" "$new/t" | sed "s|^$new/t/||" >"$new/fix-files"
  find "$new/t" -type l -lname "$new/t/*" -printf '%P\t%l\n' | sed "s|\t$new/t/|\t|" >"$new/fix-links"
  mv -T "$new" "$tmpl" 2>/dev/null || rm -rf "$new"
}

# node_env : the paths of the test's node in the environment, every one in $T
node_env() {
  export FAKE_ROOT="$T/fake" STUB_LOG="$T/calls.log" STUB_S3_DIR="$T/s3"
  export PARAMS_FILE="$T/platform_parameters.json"
  export RESOURCE_CONFIG="$T/resource_config.json"
  export LOG_DIR="$T/log" FSTAB="$T/fstab" SUDOERS_DIR="$T/sudoers.d"
  export SLURM_CONF_DIR="$T/slurm/etc" DEFAULT_HOME_ROOT="$T/home" SLURMD_CONF_CACHE="$T/conf-cache"
  export PYXIS_CONF="$T/pyxis/pyxis.conf" TMPDIR="$T/tmp"
  export SSH_CLIENT_CONF="$T/ssh_config.d/60-hyperpod-cluster.conf" LOGROTATE_CONF="$T/logrotate.d/hyperpod-slurm"
  export STATE_DIR="$T/state" PLATFORM_DIR="$T/platform" SYSTEMD_DIR="$T/systemd"
  export MEMINFO="$T/meminfo" PAM_SSHD="$T/pam.d/sshd" ACCESS_FILE="$T/security/hyperpod-slurm-admins.conf"
  export SSHD_CONFIG="$T/ssh/sshd_config" PAM_SLURM_ADOPT_CANDIDATES="$T/security/pam_slurm_adopt.so"
  export SKEL_DIR="$T/skel"
  export ENROOT_CONF="$T/enroot/enroot.conf" NVME_PATHS="$T/nvme $T/opt-sagemaker" OS_RELEASE="$T/os-release"
  export LOGROTATE_DIR="$T/logrotate.d" TEXTFILE_DIR="$T/textfile"
}

# setup: node_setup, without bats' DEBUG trap. bats sets functrace (set -T) so that its DEBUG trap, which keeps the
# stack trace a failure is reported with, runs before every command of a test's shell, inside functions too: ~0.3 ms a
# command, ~30 ms of every test for node_setup's checks alone. A function called while functrace is off does not
# inherit the trap (bash(1), `set -T`); `local -` turns it back on when setup returns. A failure in node_setup still
# fails the test (the ERR trap and set -e are untouched), reported at setup's line.
setup() {
  local -
  set +T
  node_setup
}

# node_setup : the test's node in $T, copied from the file's template, every stub on PATH in effect
node_setup() {
  local tmpl="$BATS_SUITE_TMPDIR/lifecycle-template" origin files=() rel target text
  T="$BATS_TEST_TMPDIR"
  make_template
  cp -a "$tmpl/t/." "$T/"
  # The template's own directory, where it is named, becomes the test's: replaced by bash, not a sed per test (the
  # files are text: no NUL byte for read to stop at; the quoted replacement keeps any & in it literal).
  origin="$(<"$tmpl/origin")"
  mapfile -t files <"$tmpl/fix-files"
  for rel in "${files[@]}"; do
    IFS= read -r -d '' text <"$T/$rel" || true
    printf '%s' "${text//"$origin"/"$T"}" >"$T/$rel"
  done
  while IFS=$'\t' read -r rel target; do
    ln -sfn "$T/$target" "$T/$rel"
  done <"$tmpl/fix-links"
  node_env
  export PATH="$T/bin:$PATH"
  # Refuse to run if any stub would fall through to the real command. `hash` looks each name up on PATH as running it
  # would, and leaves what it found in BASH_CMDS: no subshell per command. Forgotten again after, so a test that removes
  # a stub runs what PATH then finds.
  hash -r
  for cmd in "${STUBBED[@]}"; do
    hash "$cmd" 2>/dev/null || true
    [[ "${BASH_CMDS[$cmd]-}" == "$T/bin/$cmd" && -x "$T/bin/$cmd" ]] || {
      echo "stub for $cmd is not in effect" >&2
      return 1
    }
  done
  hash -r
  export RETRY_DELAY=0 STUB_IPS="10.1.0.12 172.17.0.1" STUB_ACTIVE_UNITS="slurmctld"
  export LOG_FLUSH_SECONDS=0 # a failed entry point waits this long for CloudWatch (lib/common.sh); common.bats times it
  # slurmctld's `scontrol show config` (stubs/stub): the cluster's name only, so no accounting database to talk to.
  export STUB_SCONTROL_CONFIG="ClusterName = ml-cluster"
  # block_imds.sh's connection test as nobody needs a metadata service: tests/e2e/test_imds_block.py has a real one.
  export IMDS_PROBE=0
  # The digests of the repository's scripts in the deploy's lifecycle record (stubs/stub `aws`), made once per run.
  export STUB_RECORD_SCRIPTS="$BATS_SUITE_TMPDIR/lifecycle-record-scripts.json"
}

# ami_node TYPE [--absent FACT]... : lays this test's node out again, as HyperPod leaves a TYPE node according to
# lifecycle/node_contract.json, without the facts named (a test of how a script adapts when an unverified fact does not hold).
ami_node() {
  local type=$1
  shift
  # --clean first removes what was laid out before (setup's controller, or an earlier ami_node), in the same start.
  python3 -S "$BATS_TEST_DIRNAME/ami_model.py" --clean --node-type "$type" --root "$T/node" --fake-root "$FAKE_ROOT" \
    --manifest "$T/ami.manifest" --map "/opt/slurm/etc=$SLURM_CONF_DIR" --map "/opt/ml/config/resource_config.json=$RESOURCE_CONFIG" \
    --map "/etc/enroot/enroot.conf=$ENROOT_CONF" --map "/etc/logrotate.d=$LOGROTATE_DIR" \
    --map "/usr/local/share/pyxis/pyxis.conf=$PYXIS_CONF" --map "/var/spool/slurmd/conf-cache=$SLURMD_CONF_CACHE" \
    --map "/fsx=$T/fsx" --map "/opt/dlami/nvme=$T/nvme" --map "/opt/sagemaker=$T/opt-sagemaker" \
    --map "/etc/os-release=$OS_RELEASE" "$@"
}

# set_param KEY.PATH JSON_VALUE [KEY.PATH JSON_VALUE]... : edits the test's copy of the parameters file (one Python
# start for all the pairs)
set_param() {
  python3 -S - "$PARAMS_FILE" "$@" <<'EOF'
import json, sys
path, pairs = sys.argv[1], sys.argv[2:]
if not pairs or len(pairs) % 2:
    sys.exit("set_param: KEY.PATH JSON_VALUE pairs expected")
with open(path) as f:
    params = json.load(f)
for dotted, value in zip(pairs[::2], pairs[1::2]):
    *parents, last = dotted.split(".")
    node = params
    for key in parents:
        node = node[key]
    node[last] = json.loads(value)
with open(path, "w") as f:
    json.dump(params, f, indent=2)
EOF
}

# calls NAME -> the recorded calls of one stub. One awk, not a read loop in the test's shell: bats runs its DEBUG
# trap before every command of a test's shell, which made a loop over a run's log cost ~0.7 ms a line.
calls() {
  awk -v prefix="$1 " 'index($0, prefix) == 1' "$STUB_LOG"
}

# mutating_calls -> every recorded call that changes the node (`scontrol show ...`, `ping` and `--version` only read)
MUTATING='^(mount|umount|groupadd|useradd|usermod|userdel|scontrol|apt-get|apt-mark|aws) |^ip6?tables -w -A |^systemctl (daemon-reload|enable|restart|reload)'
# record_deploy DIR : the deploy recorded DIR's scripts and the parameters as they are now ($PARAMS_FILE); stubs/stub
# serves that as the lifecycle record (lib/verify.sh), e.g. for a test that runs a copy of the scripts with one replaced.
record_deploy() {
  python3 -S "$BATS_TEST_DIRNAME/lifecycle_record.py" "$1" "$PARAMS_FILE" >"$T/lifecycle_record.json"
  export STUB_LIFECYCLE_RECORD="$T/lifecycle_record.json"
}

# copy_installed : the node's copy of the scripts ($PLATFORM_DIR) as it is now is what install_users_sync.sh recorded,
# for a test that replaces one of its scripts with a fake (the users sync runs only the recorded copy, lib/verify.sh).
copy_installed() {
  local names
  mapfile -t names < <(cut -d' ' -f3- "$STATE_DIR/platform_scripts.sha256")
  python3 -S "$SCRIPTS/lib/verify.py" manifest "$PLATFORM_DIR" "${names[@]}" >"$T/manifest"
  mv "$T/manifest" "$STATE_DIR/platform_scripts.sha256"
}

# (one awk, for calls' reason)
mutating_calls() {
  awk -v mutating="$MUTATING" '$0 ~ mutating && index($0, "scontrol show ") != 1 && $0 != "scontrol --version" &&
    $0 != "scontrol ping" && index($0, "aws secretsmanager get-secret-value ") != 1' "$STUB_LOG"
}

# add_section_artifact SECTION PREFIX NAME FILE CONTENT [SHA] : puts a fake .deb in the fake S3 under PREFIX and
# lists it in the params' SECTION.artifacts (its sha256 unless SHA is given)
add_section_artifact() {
  local section=$1 prefix=$2
  printf '%s' "$5" >"$STUB_S3_DIR/$4"
  list_artifacts "$section" "$prefix" "$3" "$4" "${6:-}"
}

# add_section_artifacts SECTION PREFIX NAME FILE CONTENT [NAME FILE CONTENT]... : add_section_artifact for several,
# each with its own sha256, in one Python start
add_section_artifacts() {
  set_param_and_artifacts "$1" "$2" -- "${@:3}"
}

# set_param_and_artifacts SECTION PREFIX [KEY.PATH JSON_VALUE]... -- NAME FILE CONTENT [NAME FILE CONTENT]... :
# set_param's pairs, then add_section_artifacts' entries, in one Python start
set_param_and_artifacts() {
  local section=$1 prefix=$2 sets=() entries=()
  shift 2
  while (($#)) && [[ "$1" != -- ]]; do
    sets+=("$1")
    shift
  done
  shift
  while (($#)); do
    printf '%s' "$3" >"$STUB_S3_DIR/$2"
    entries+=("$1" "$2" "")
    shift 3
  done
  list_artifacts "$section" "$prefix" "${entries[@]}" -- "${sets[@]}"
}

# list_artifacts SECTION PREFIX NAME FILE SHA [NAME FILE SHA]... [-- KEY.PATH JSON_VALUE...] : each FILE of the fake S3
# in SECTION.artifacts, under s3://mirror-bucket/PREFIX/ (SHA "" for the file's own sha256), after set_param's pairs
list_artifacts() {
  python3 -S - "$PARAMS_FILE" "$STUB_S3_DIR" "$@" <<'EOF'
import hashlib, json, sys
path, s3_dir, section, prefix, *args = sys.argv[1:]
entries, sets = (args[: args.index("--")], args[args.index("--") + 1 :]) if "--" in args else (args, [])
if len(entries) % 3 or len(sets) % 2:
    sys.exit("list_artifacts: NAME FILE SHA triples, then KEY.PATH JSON_VALUE pairs expected")
with open(path) as f:
    params = json.load(f)
for dotted, value in zip(sets[::2], sets[1::2]):  # as set_param
    *parents, last = dotted.split(".")
    node = params
    for key in parents:
        node = node[key]
    node[last] = json.loads(value)
for name, file, sha in zip(entries[::3], entries[1::3], entries[2::3]):
    with open(f"{s3_dir}/{file}", "rb") as f:
        sha = sha or hashlib.sha256(f.read()).hexdigest()
    params[section]["artifacts"].append({"name": name, "s3_uri": f"s3://mirror-bucket/{prefix}/{file}", "sha256": sha})
with open(path, "w") as f:
    json.dump(params, f, indent=2)
EOF
}

# add_artifact NAME FILE CONTENT [SHA] : a container runtime artifact; add_artifacts NAME FILE CONTENT...: several
add_artifact() { add_section_artifact container_runtime artifacts "$@"; }
add_artifacts() { add_section_artifacts container_runtime artifacts "$@"; }
