#!/bin/bash
# in_etc_namespace.sh DIR NAME... -- CMD [ARG...] : CMD in a private mount namespace whose /etc/NAME is DIR/NAME; the
# host's files are untouched. Exits 99 when a bind mount cannot be made (a broken test set-up, never CMD's answer).
# useradd and userdel in a test running beside this one replace /etc/passwd and /etc/group by rename: a bind mount
# caught in that instant fails, so each is tried again.
set -euo pipefail
if [[ "${IN_ETC_NAMESPACE:-}" != 1 ]]; then
  IN_ETC_NAMESPACE=1 exec unshare --mount --propagation private "$0" "$@"
fi
unset IN_ETC_NAMESPACE
dir=$1
shift
while [[ $# -gt 0 && "$1" != -- ]]; do
  attempt=1
  until /usr/bin/mount --bind "$dir/$1" "/etc/$1" 2>/dev/null; do
    if ((attempt == 20)); then
      echo "in_etc_namespace.sh: cannot bind $dir/$1 over /etc/$1" >&2
      exit 99
    fi
    attempt=$((attempt + 1))
    sleep 0.1
  done
  shift
done
shift
exec "$@"
