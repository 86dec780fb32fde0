#!/usr/bin/env bash
# Builds the shipped binaries (ferry-hub and ferry-agent, `--profile dist`)
# reproducibly: the same commit gives byte-identical binaries wherever the
# checkout, the target directory and cargo's home are. rustc embeds absolute
# paths in panic locations (generated code included from OUT_DIR, crates
# from the registry); each is remapped to a fixed prefix. Cargo keeps these
# flags out of the `-C metadata` hash, so symbol names do not depend on
# them. deploy/image/check-reproducible.sh checks the result.
#
# usage: build-binaries.sh            (from anywhere in the checkout)
# environment: CARGO_TARGET_DIR (default: <checkout>/target), CARGO_HOME
# output: $CARGO_TARGET_DIR/dist/ferry-hub and .../ferry-agent
set -euo pipefail

src=$(cd "$(dirname "$0")/../.." && pwd)
target=${CARGO_TARGET_DIR:-$src/target}
mkdir -p "$target"
target=$(cd "$target" && pwd)
cargo_home=${CARGO_HOME:-$HOME/.cargo}
# The more specific prefix last: rustc applies the last mapping that matches,
# and the target directory may lie inside the checkout.
flags="['--remap-path-prefix=$cargo_home=/cargo', '--remap-path-prefix=$src=/src', '--remap-path-prefix=$target=/target']"
cd "$src"
CARGO_TARGET_DIR="$target" cargo build --profile dist --locked -p ferry-hub -p ferry-agent \
  --config "build.rustflags=$flags"
