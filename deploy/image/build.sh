#!/bin/sh
# Builds ferry's container image from already-built binaries, without a
# container tool or a registry: `ferry-tools image` (tools/src/image/) writes
# the root filesystem rootfs.sh assembles for the Containerfile as one
# deterministic layer, the image config (non-root user 65532, entrypoint, OCI
# labels), its CycloneDX SBOM (files and the crates of each binary, from this
# workspace's cargo metadata) as an artifact referring to the image, and an
# OCI layout directory. The e2e image test runs the same
# writer.
#
# deploy/Containerfile produces the same filesystem and config with
# `docker build -f deploy/Containerfile .`.
#
# usage: build.sh OUT_DIR HUB_BINARY AGENT_BINARY
#   OUT_DIR               the OCI layout directory to (re)create
#   HUB_BINARY, AGENT_BINARY  the shipped builds:
#                         `deploy/image/build-binaries.sh` (cargo build --profile dist)
#                         writes target/dist/ferry-hub and target/dist/ferry-agent
# environment:
#   FERRY_IMAGE_VERSION   org.opencontainers.image.version (default: the workspace version)
#   FERRY_IMAGE_SOURCE    org.opencontainers.image.source
#   FERRY_IMAGE_TAG       the tag in OUT_DIR/index.json (default: the version)
#   FERRY_TOOLS           a built ferry-tools binary (default: cargo run it)
set -eu

if [ "$#" -ne 3 ]; then
  echo "usage: $0 OUT_DIR HUB_BINARY AGENT_BINARY" >&2
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
workspace=$(cd "$here/../.." && pwd)

if [ -n "${FERRY_TOOLS:-}" ]; then
  exec "$FERRY_TOOLS" image --workspace "$workspace/Cargo.toml" "$@"
fi
exec cargo run --quiet --release --locked --manifest-path "$workspace/Cargo.toml" \
  -p ferry-tools --bin ferry-tools -- image --workspace "$workspace/Cargo.toml" "$@"
