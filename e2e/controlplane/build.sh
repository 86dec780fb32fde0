#!/bin/sh
# Builds the control plane binary: build.sh [OUTPUT] (default ./ferry-controlplane).
#
# The -X flags stamp the Kubernetes version the way Kubernetes' own build
# does. Without them /version reports "v0.0.0-master+$Format:%H$", which
# `kubectl version` and clients that parse gitVersion reject (the API
# itself behaves as 1.36 either way). -s -w drop the symbol table and DWARF
# (panics still print full stacks): a third smaller binary, and a faster link
# that needs less memory.
set -eu
out=${1:-ferry-controlplane}
case $out in /*) ;; *) out=$PWD/$out ;; esac
cd "$(dirname "$0")"
version=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
minor=$(echo "$version" | cut -d. -f2)
pkg=k8s.io/component-base/version
exec go build -trimpath -buildvcs=false \
	-ldflags "-s -w -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor" \
	-o "$out" .
