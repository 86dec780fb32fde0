#!/bin/sh
# Builds ferry's container image from already-built binaries with buildah,
# without pulling anything: `buildah from scratch`, the root filesystem that
# rootfs.sh assembles, the image config (non-root user 65532, entrypoint,
# OCI labels), then writes the image as an OCI layout directory.
#
# This is what CI runs: this machine reaches no registry, so it cannot pull
# the Containerfile's base images. deploy/Containerfile produces the same
# layout with `docker build -f deploy/Containerfile .`.
#
# usage: build.sh OUT_DIR HUB_BINARY AGENT_BINARY
#   OUT_DIR               the OCI layout directory to (re)create
# environment:
#   FERRY_IMAGE_VERSION   org.opencontainers.image.version (default: the workspace version)
#   FERRY_IMAGE_SOURCE    org.opencontainers.image.source
#   FERRY_IMAGE_TAG       the tag in OUT_DIR/index.json (default: the version)
#
# buildah runs with its own throwaway storage (vfs driver, chroot isolation):
# overlay and the default storage need kernel features and a shared
# /var/lib/containers that CI machines and parallel tests should not rely on.
set -eu

if [ "$#" -ne 3 ]; then
  echo "usage: $0 OUT_DIR HUB_BINARY AGENT_BINARY" >&2
  exit 2
fi
out=$1
hub=$2
agent=$3
here=$(cd "$(dirname "$0")" && pwd)
workspace=$(cd "$here/../.." && pwd)

command -v buildah >/dev/null 2>&1 || {
  echo "build.sh: buildah is not installed (Debian: apt-get install -y buildah)" >&2
  exit 1
}

version=${FERRY_IMAGE_VERSION:-$(sed -n '/^\[workspace.package\]/,/^\[/ s/^version = "\(.*\)"/\1/p' "$workspace/Cargo.toml")}
[ -n "$version" ] || { echo "build.sh: no version in $workspace/Cargo.toml" >&2; exit 1; }
source=${FERRY_IMAGE_SOURCE:-https://github.com/ferry-rs/ferry}
tag=${FERRY_IMAGE_TAG:-$version}

scratch=$(mktemp -d "${TMPDIR:-/tmp}/ferry-image.XXXXXX")
container=
cleanup() {
  if [ -n "$container" ]; then
    buildah $store rm "$container" >/dev/null 2>&1 || true
  fi
  rm -rf "$scratch"
}
trap cleanup EXIT INT TERM
export BUILDAH_ISOLATION=chroot
store="--root $scratch/storage --runroot $scratch/run --storage-driver vfs"

"$here/rootfs.sh" "$scratch/rootfs" "$hub" "$agent"

# shellcheck disable=SC2086 # $store is a list of flags
container=$(buildah $store from scratch)
# shellcheck disable=SC2086
buildah $store copy --quiet "$container" "$scratch/rootfs" / >/dev/null
# shellcheck disable=SC2086
buildah $store config \
  --user 65532:65532 \
  --workingdir / \
  --entrypoint '["/usr/local/bin/ferry-hub"]' \
  --cmd serve \
  --env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
  --label org.opencontainers.image.title=ferry \
  --label "org.opencontainers.image.description=ferry hub and agent (ferry-hub is the entrypoint; run /usr/local/bin/ferry-agent for the agent)" \
  --label "org.opencontainers.image.source=$source" \
  --label "org.opencontainers.image.version=$version" \
  --label org.opencontainers.image.licenses=Apache-2.0 \
  "$container"
# shellcheck disable=SC2086
buildah $store commit --quiet --rm "$container" "localhost/ferry:$tag" >/dev/null
container=
rm -rf "$out"
mkdir -p "$(dirname "$out")"
# shellcheck disable=SC2086
buildah $store push --quiet "localhost/ferry:$tag" "oci:$out:$tag"

rootfs_bytes=$(du -sb "$scratch/rootfs" | cut -f1)
echo "build.sh: image localhost/ferry:$tag in $out (root filesystem $rootfs_bytes bytes; layout $(du -sb "$out" | cut -f1) bytes)"
