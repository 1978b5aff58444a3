#!/usr/bin/env bats
# tools/build_slurm_root.sh --mirror: the Debian mirror the Slurm root is built from is the one this machine's APT
# sources name for its own release, on a Debian 12 host (deb822 or sources.list) as on a Debian 13 one; never
# -security, -updates or a third-party source. Host names here are .invalid (RFC 2606): nothing is fetched.

bats_require_minimum_version 1.5.0

REPO_ROOT="$(cd "$BATS_TEST_DIRNAME/../.." && pwd)"
BUILD="$REPO_ROOT/tools/build_slurm_root.sh"

setup() {
  T="$BATS_TEST_TMPDIR"
  mkdir -p "$T/apt/sources.list.d"
  export APT_ETC="$T/apt" OS_RELEASE="$T/os-release"
}

host() {
  printf 'PRETTY_NAME="Debian GNU/Linux"\nVERSION_CODENAME=%s\n' "$1" >"$OS_RELEASE"
}

@test "Debian 13, deb822: the trixie entry's first URI, not the security one or a third party's" {
  host trixie
  cat >"$T/apt/sources.list.d/vendor.sources" <<'EOF'
Types: deb
URIs: https://vendor.invalid/apt
Suites: nodistro
Components: main
EOF
  cat >"$T/apt/sources.list.d/debian.sources" <<'EOF'
Types: deb
URIs: http://security.invalid/debian-security
Suites: trixie-security
Components: main

Types: deb deb-src
URIs: http://mirror.invalid/debian http://second.invalid/debian
Suites: trixie trixie-updates
Components: main
EOF
  run "$BUILD" --mirror
  [ "$status" -eq 0 ]
  [ "$output" = http://mirror.invalid/debian ]
}

@test "Debian 12, deb822: the bookworm entry" {
  host bookworm
  cat >"$T/apt/sources.list.d/debian.sources" <<'EOF'
Types: deb
URIs: http://mirror.invalid/debian
Suites: bookworm bookworm-updates
Components: main

Types: deb
URIs: http://security.invalid/debian-security
Suites: bookworm-security
Components: main
EOF
  run "$BUILD" --mirror
  [ "$output" = http://mirror.invalid/debian ]
}

@test "Debian 12, sources.list with options: the line of its own release" {
  host bookworm
  cat >"$T/apt/sources.list" <<'EOF'
# deb http://old.invalid/debian bookworm main
deb [signed-by=/usr/share/keyrings/x.gpg] http://security.invalid/debian-security bookworm-security main
deb [arch=amd64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://mirror.invalid/debian bookworm main
EOF
  run "$BUILD" --mirror
  [ "$output" = http://mirror.invalid/debian ]
}

@test "no source for the machine's release: a clear error, no guess" {
  host trixie
  printf 'deb http://mirror.invalid/debian bookworm main\n' >"$T/apt/sources.list"
  run "$BUILD" --mirror
  [ "$status" -ne 0 ]
  [ "$output" = "build_slurm_root.sh: no APT source for trixie found" ]
}
