# Sourced by dev/variants/compare and compare-conv: builds a harness for the checked-out commit and
# for each patch (or stack of patches) of this folder, each in a clean worktree of HEAD.
# The caller defines compile_harness DEST (run inside the worktree; builds the harness at DEST)
# and sets `out` (an existing folder) and `tool` (the harness's file name and the error prefix).

build_one() {  # build_one NAME [PATCH...]: a clean worktree of HEAD, the patches applied, the harness built
  local name=$1; shift
  local wt
  wt=$(mktemp -d)
  git worktree add -q --detach "$wt" HEAD
  for p in "$@"; do
    git -C "$wt" apply "$PWD/$p" || { git worktree remove --force "$wt"; echo "$tool: $p does not apply" >&2; return 1; }
  done
  mkdir -p "$out/$name"
  local rc=0
  (cd "$wt" && compile_harness "$out/$name/$tool") || rc=$?
  git worktree remove --force "$wt"
  return $rc
}

build_all() {  # build_all SPEC...: base, then one build per SPEC (a.patch, or a.patch+b.patch stacked)
  build_one base
  local spec parts p name
  for spec in "$@"; do
    IFS=+ read -r -a parts <<<"$spec"
    local paths=()
    for p in "${parts[@]}"; do paths+=("dev/variants/$(basename "$p")"); done
    name=$(basename "${parts[-1]}" .patch)
    build_one "$name" "${paths[@]}"
  done
  echo "built: $(cd "$out" && ls -d */ | tr -d / | tr '\n' ' ')"
}
