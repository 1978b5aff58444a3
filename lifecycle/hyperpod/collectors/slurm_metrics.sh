#!/usr/bin/env bash
# Slurm exporter for the controller, as a node-exporter textfile collector (no Debian package of a Slurm exporter
# exists). Run by hyperpod-slurm-metrics.timer; writes $TEXTFILE_DIR/slurm.prom atomically, so the node exporter
# never reads half a file. Reads only: `sinfo` and `squeue`.
#
#   slurm_up                             1 when sinfo and squeue answered, else 0 (the other series are then absent)
#   slurm_nodes{partition,state}         nodes by partition and state (sinfo %T, flags such as * and ~ dropped)
#   slurm_cpus{partition,state}          CPUs allocated/idle/other/total per partition (sinfo %C)
#   slurm_jobs{partition,state}          jobs by partition and state (squeue %T); pending and running always listed
set -euo pipefail

TEXTFILE_DIR="${TEXTFILE_DIR:-/var/lib/prometheus/node-exporter}"
export PATH="$PATH:${SLURM_BIN_DIR:-/opt/slurm/bin}"

out="$(mktemp "$TEXTFILE_DIR/.slurm.prom.XXXXXX")"
trap 'rm -f "$out"' EXIT

if ! nodes="$(sinfo -h -o '%R|%T|%D|%C')" || ! jobs="$(squeue -h -a -o '%P|%T')"; then
  printf '# HELP slurm_up Whether sinfo and squeue answered.\n# TYPE slurm_up gauge\nslurm_up 0\n' >"$out"
  chmod 0644 "$out"
  mv "$out" "$TEXTFILE_DIR/slurm.prom"
  echo "slurm_metrics: sinfo or squeue failed" >&2
  exit 1
fi

awk -F'|' -v jobs="$jobs" '
  function clean(s) { s = tolower(s); gsub(/[^a-z0-9_+]/, "", s); return s }
  NF == 4 {
    part = $1; state = clean($2)
    nodes[part "|" state] += $3
    split($4, c, "/")  # allocated/idle/other/total
    cpus[part "|allocated"] += c[1]; cpus[part "|idle"] += c[2]; cpus[part "|other"] += c[3]; cpus[part "|total"] += c[4]
    partitions[part] = 1
  }
  END {
    n = split(jobs, lines, "\n")
    for (p in partitions) { jobcount[p "|pending"] += 0; jobcount[p "|running"] += 0 }
    for (i = 1; i <= n; i++) {
      if (split(lines[i], f, "|") != 2) continue
      m = split(f[1], parts, ",")  # a job submitted to several partitions counts in each
      for (j = 1; j <= m; j++) jobcount[parts[j] "|" clean(f[2])] += 1
    }
    print "# HELP slurm_up Whether sinfo and squeue answered."
    print "# TYPE slurm_up gauge"
    print "slurm_up 1"
    print "# HELP slurm_nodes Slurm nodes by partition and state."
    print "# TYPE slurm_nodes gauge"
    for (k in nodes) { split(k, a, "|"); printf "slurm_nodes{partition=\"%s\",state=\"%s\"} %d\n", a[1], a[2], nodes[k] }
    print "# HELP slurm_cpus Slurm CPUs by partition and state (allocated, idle, other, total)."
    print "# TYPE slurm_cpus gauge"
    for (k in cpus) { split(k, a, "|"); printf "slurm_cpus{partition=\"%s\",state=\"%s\"} %d\n", a[1], a[2], cpus[k] }
    print "# HELP slurm_jobs Slurm jobs by partition and state."
    print "# TYPE slurm_jobs gauge"
    for (k in jobcount) { split(k, a, "|"); printf "slurm_jobs{partition=\"%s\",state=\"%s\"} %d\n", a[1], a[2], jobcount[k] }
  }' <<<"$nodes" >"$out"
chmod 0644 "$out"
mv "$out" "$TEXTFILE_DIR/slurm.prom"
