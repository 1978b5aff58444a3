#!/bin/sh
# enter_slurm_root.sh ROOT FSTAB -- COMMAND [ARG]...
# Runs COMMAND inside the Debian 13 root (tools/build_slurm_root.sh) as a node of the e2e tests sees it: in a mount
# namespace of its own (nothing here touches the caller's), with the mounts FSTAB lists (tests/e2e/slurm_root.py
# writes it: this machine's /proc, /dev and /sys, the temporary directories every test keeps its files in and the
# checkout with the scripts under test at the same paths as outside, this machine's /etc at /host-etc (the root's
# passwd, group, shadow and hosts are links into it: a user added later is seen by a daemon started earlier), then
# each bind of the caller, e.g. a cluster's munge directory at /run/munge). One `mount --all` makes them all, in the
# file's order, where one `mount` each cost a process start per mount on every command. The caller's own mounts under
# a directory come along (rbind): a namespace that hides a path outside hides it inside too. COMMAND runs in the
# caller's working directory (/ when the root has no such path) with the caller's environment; PATH gains the root's
# system directories.
# Needs root. tests/e2e/slurm_root.py builds these command lines.
set -eu
exec unshare --mount --propagation private -- /bin/sh -eu -c '
root=$1 fstab=$2
shift 3  # ROOT FSTAB --
mount --all --fstab "$fstab"
PATH="${PATH:+$PATH:}/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
export PATH
exec chroot "$root" /bin/sh -c '"'"'cd "$0" 2>/dev/null || cd /; exec "$@"'"'"' "$PWD" "$@"
' enter_slurm_root "$@"
