#!/usr/bin/env bash
# Builds hookonce's .deb and .rpm (deploy/packages/nfpm.yaml) into OUT
# (default dist/). Usage, from anywhere in the repository:
#   deploy/packages/build.sh
#   VERSION=1.2.0 GOARCH=arm64 OUT=/tmp/pkgs deploy/packages/build.sh
# VERSION (default: git describe --tags --always --dirty) goes into the
# binary (-X main.version, as the Dockerfile does) and, made acceptable to
# dpkg and rpm, into the package version: v1.2.0-3-gabc → 1.2.0+3.gabc,
# an untagged abc1234 → 0~gitabc1234. nfpm's CLI runs pinned through
# go run, so hookonce's go.mod gets no nfpm dependency.
set -euo pipefail
NFPM=github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.45.2

cd "$(dirname "$0")/../.."
OUT=${OUT:-dist}
VERSION=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
GOARCH=${GOARCH:-$(go env GOARCH)}

v=${VERSION#v}
[[ $v =~ ^[0-9]+\.[0-9] ]] || v="0~git$v"   # no release tag yet
v=${v/-/+}   # first hyphen (commits since the tag) → +
v=${v//-/.}  # the rest (g<hash>, dirty) → .
v=${v//[^A-Za-z0-9.+~]/.}
export PKG_VERSION=$v NFPM_ARCH=$GOARCH

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export HOOKONCE_BIN=$work/hookonce
CGO_ENABLED=0 GOOS=linux GOARCH=$GOARCH go build -trimpath -buildvcs=false \
  -ldflags "-s -w -X main.version=$VERSION" -o "$HOOKONCE_BIN" .

mkdir -p "$OUT"
for p in deb rpm; do
  go run "$NFPM" pkg --config deploy/packages/nfpm.yaml --packager "$p" --target "$OUT"
done
