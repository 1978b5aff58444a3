#!/bin/sh
# enter_slurm_root.sh ROOT [DIR | SOURCE:TARGET]... -- COMMAND [ARG]...
# Runs COMMAND inside the Debian 13 root (tools/build_slurm_root.sh) as a node of the e2e tests sees it: in a mount
# namespace of its own (nothing here touches the caller's), with this machine's /proc, /dev and /sys, each DIR at the
# same path as outside (the temporary directories every test keeps its files in, the checkout with the scripts under
# test), this machine's /etc at /host-etc (the root's passwd, group, shadow and hosts are links into it: a user added
# later is seen by a daemon started earlier), then each SOURCE bind-mounted at TARGET inside the root (e.g. a
# cluster's munge directory at /run/munge). The caller's own mounts under a DIR come along (rbind): a namespace that
# hides a path outside hides it inside too. COMMAND runs in the caller's working directory (/ when the root has no
# such path) with the caller's environment; PATH gains the root's system directories.
# Needs root. tests/e2e/slurm_root.py builds these command lines.
set -eu
exec unshare --mount --propagation private -- /bin/sh -eu -c '
root=$1
shift
for d in /proc /dev /sys; do mount --rbind "$d" "$root$d"; done
mount --bind /etc "$root/host-etc"
while [ "$1" != -- ]; do
  case $1 in
    *:*) source=${1%%:*} target=${1#*:} ;;
    *) source=$1 target=$1 ;;
  esac
  [ -d "$root$target" ] || mkdir -p "$root$target"
  mount --rbind "$source" "$root$target"
  shift
done
shift
cwd=$(pwd)
PATH="${PATH:+$PATH:}/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
export PATH
exec chroot "$root" /bin/sh -c '"'"'cd "$0" 2>/dev/null || cd /; exec "$@"'"'"' "$cwd" "$@"
' enter_slurm_root "$@"
