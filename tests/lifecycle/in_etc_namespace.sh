#!/bin/bash
# in_etc_namespace.sh DIR NAME... -- CMD [ARG...] : CMD in a private mount namespace whose /etc/NAME is DIR/NAME; the
# host's files are untouched. Exits 99 when the view cannot be made (a broken test set-up, never CMD's answer).
# useradd and userdel in a test running beside this one replace /etc/passwd and /etc/group by rename, and a rename over
# a file that is a mount point in another namespace detaches that mount there (Linux >= 3.18): a file bound over
# /etc/passwd would fall back to the host's in the middle of CMD. So the files are the upper layer of an overlay on the
# /etc directory (upper wins, whatever the host renames below it); a directory NAME (pam.d) is bound over the overlay's
# /etc/NAME, a mount on a directory no test renames. /usr/bin/mount by path: the tests put a stub `mount` first on PATH.
set -euo pipefail
if [[ "${IN_ETC_NAMESPACE:-}" != 1 ]]; then
  IN_ETC_NAMESPACE=1 exec unshare --mount --propagation private "$0" "$@"
fi
unset IN_ETC_NAMESPACE
fail() {
  echo "in_etc_namespace.sh: $*" >&2
  exit 99
}
dir=$1
shift
names=()
while [[ $# -gt 0 && "$1" != -- ]]; do
  names+=("$1")
  shift
done
shift
layers="$dir/.etc-overlay" # a tmpfs in this namespace only: overlayfs wants its upper layer off overlayfs
mkdir -p "$layers"
/usr/bin/mount -t tmpfs -o mode=0755 etc-overlay "$layers" || fail "cannot mount a tmpfs on $layers"
mkdir "$layers/upper" "$layers/work"
for name in "${names[@]}"; do
  [[ -d "$dir/$name" ]] || cp -a "$dir/$name" "$layers/upper/$name" || fail "cannot copy $dir/$name"
done
/usr/bin/mount -t overlay etc-view -o "lowerdir=/etc,upperdir=$layers/upper,workdir=$layers/work" /etc ||
  fail "cannot mount an overlay on /etc"
for name in "${names[@]}"; do
  if [[ -d "$dir/$name" ]]; then
    /usr/bin/mount --bind "$dir/$name" "/etc/$name" || fail "cannot bind $dir/$name over /etc/$name"
  fi
done
exec "$@"
