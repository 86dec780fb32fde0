#!/bin/sh
# Assembles ferry's runtime root filesystem in DIR from the given binaries:
# the binaries in /usr/local/bin, the shared libraries they link (as ldd
# resolves them on the build machine, at the paths the dynamic loader looks
# in), the CA certificate bundle, and /etc/passwd + /etc/group naming the
# non-root user 65532. Nothing else: no shell, no package manager.
#
# deploy/Containerfile (docker build / buildah bud) runs it in its builder
# stage; deploy/image/build.sh and the tests write the same files with
# `ferry-tools image` (tools/src/image/rootfs.rs), and a unit test there
# compares the two.
#
# usage: rootfs.sh DIR BINARY...
set -eu

if [ "$#" -lt 2 ]; then
  echo "usage: $0 DIR BINARY..." >&2
  exit 2
fi
root=$1
shift

uid=65532
certs=/etc/ssl/certs/ca-certificates.crt
[ -f "$certs" ] || { echo "rootfs.sh: $certs is missing (install ca-certificates)" >&2; exit 1; }
command -v ldd >/dev/null 2>&1 || { echo "rootfs.sh: ldd is missing (install libc-bin)" >&2; exit 1; }

mkdir -p "$root/usr/local/bin" "$root/etc/ssl/certs"

# Copies FILE (following symlinks) to the same path under the root.
copy_resolved() {
  mkdir -p "$root$(dirname "$1")"
  cp -L "$1" "$root$1"
}

for binary in "$@"; do
  [ -x "$binary" ] || { echo "rootfs.sh: $binary is not an executable" >&2; exit 1; }
  install -m 0755 "$binary" "$root/usr/local/bin/$(basename "$binary")"
  # ldd lines: "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" and
  # "/lib64/ld-linux-x86-64.so.2 (0x...)"; linux-vdso has no file.
  libs=$(ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }')
  if [ -z "$libs" ]; then
    echo "rootfs.sh: ldd found no libraries for $binary (static binary?)" >&2
  fi
  for lib in $libs; do
    copy_resolved "$lib"
  done
done

copy_resolved "$certs"
printf 'root:x:0:0:root:/:/sbin/nologin\nnonroot:x:%s:%s:nonroot:/:/sbin/nologin\n' "$uid" "$uid" >"$root/etc/passwd"
printf 'root:x:0:\nnonroot:x:%s:\n' "$uid" >"$root/etc/group"
