#!/usr/bin/env bash
# Checks that the shipped image is reproducible: builds it twice from one
# commit (deploy/image/build-binaries.sh, then build.sh), in two fresh clones
# at different paths with separate cargo target directories (nothing shared
# but the registry's downloaded sources), and compares the image digests. On a difference it says which file differs.
# Slow by nature (two cold `--profile dist` builds, fat LTO: about 30 min on
# 2 cores), so CI does not run it; run it before a release.
#
# usage: check-reproducible.sh [REVISION]   (default: HEAD)
# environment:
#   FERRY_TOOLS        a built ferry-tools binary for the image writer
#                      (default: build.sh runs it with cargo)
#   FERRY_REPRO_DIR    where the clones and builds go (default: a new
#                      directory under TMPDIR, removed afterwards)
set -euo pipefail

rev="${1:-HEAD}"
repo=$(cd "$(dirname "$0")/../.." && pwd)
commit=$(git -C "$repo" rev-parse --verify "$rev^{commit}")
if [ -n "${FERRY_REPRO_DIR:-}" ]; then
  work="$FERRY_REPRO_DIR"
  mkdir -p "$work"
else
  work=$(mktemp -d "${TMPDIR:-/tmp}/ferry-repro.XXXXXX")
  trap 'rm -rf "$work"' EXIT
fi

# The two builds differ in every path a build could leak: the source
# directory (one is nested deeper) and the target directory.
sources=("$work/a/ferry" "$work/b/other/place/ferry")
for i in 0 1; do
  src=${sources[$i]}
  target="$work/target-$i"
  rm -rf "$src" "$target" "$work/oci-$i"
  mkdir -p "$(dirname "$src")"
  git clone --quiet --no-hardlinks "$repo" "$src"
  git -C "$src" checkout --quiet --detach "$commit"
  echo "check-reproducible: build $((i + 1)) of 2 in $src" >&2
  started=$(date +%s)
  CARGO_TARGET_DIR="$target" CARGO_INCREMENTAL=0 "$src/deploy/image/build-binaries.sh" >/dev/null 2>&1 \
    || { echo "check-reproducible: build $((i + 1)) failed" >&2; exit 1; }
  echo "check-reproducible: built in $(( $(date +%s) - started )) s" >&2
  "$src/deploy/image/build.sh" "$work/oci-$i" "$target/dist/ferry-hub" "$target/dist/ferry-agent" >/dev/null
done

index_digest() {
  sha256sum "$1/index.json" | cut -d' ' -f1
}
a=$(index_digest "$work/oci-0")
b=$(index_digest "$work/oci-1")
for bin in ferry-hub ferry-agent; do
  echo "check-reproducible: $bin $(sha256sum "$work/target-0/dist/$bin" | cut -d' ' -f1) $(sha256sum "$work/target-1/dist/$bin" | cut -d' ' -f1)"
done
if [ "$a" = "$b" ]; then
  echo "check-reproducible: commit $commit: both builds give index sha256:$a"
  exit 0
fi
echo "check-reproducible: commit $commit: the builds differ (index sha256:$a vs sha256:$b)" >&2
for bin in ferry-hub ferry-agent; do
  if ! cmp -s "$work/target-0/dist/$bin" "$work/target-1/dist/$bin"; then
    echo "  $bin differs; first differing strings:" >&2
    diff <(strings -n 12 "$work/target-0/dist/$bin") <(strings -n 12 "$work/target-1/dist/$bin") | head -n 20 >&2 || true
  fi
done
exit 1
