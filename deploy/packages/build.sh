#!/usr/bin/env bash
# Builds hookonce's .deb and .rpm (deploy/packages/nfpm.yaml) into OUT
# (default dist/). Usage, from anywhere in the repository:
#   deploy/packages/build.sh
#   VERSION=1.2.0 GOARCH=arm64 OUT=/tmp/pkgs deploy/packages/build.sh
# VERSION (default: deploy/packages/version.sh) goes into the binary
# (-X main.version, as the Dockerfile does) and, as version.sh --package
# makes it, into the package version. HOOKONCE_BIN: a static binary
# already built for GOARCH (deploy/release.sh passes its own); else this
# script builds one. nfpm's CLI runs pinned through go run, so hookonce's
# go.mod gets no nfpm dependency.
set -euo pipefail
NFPM=github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.45.2

cd "$(dirname "$0")/../.."
OUT=${OUT:-dist}
VERSION=${VERSION:-$(deploy/packages/version.sh)}
GOARCH=${GOARCH:-$(go env GOARCH)}
PKG_VERSION=$(deploy/packages/version.sh --package "$VERSION")
export PKG_VERSION NFPM_ARCH=$GOARCH

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -z "${HOOKONCE_BIN:-}" ]; then
	HOOKONCE_BIN=$work/hookonce
	CGO_ENABLED=0 GOOS=linux GOARCH=$GOARCH go build -trimpath -buildvcs=false \
		-ldflags "-s -w -X main.version=$VERSION -X main.revision=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)" \
		-o "$HOOKONCE_BIN" .
fi
export HOOKONCE_BIN

mkdir -p "$OUT"
for p in deb rpm; do
	go run "$NFPM" pkg --config deploy/packages/nfpm.yaml --packager "$p" --target "$OUT"
done
