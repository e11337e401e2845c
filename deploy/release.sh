#!/usr/bin/env bash
# Builds a hookonce release into OUT (default dist/<version>/):
#   hookonce-<version>-linux-amd64, hookonce-<version>-linux-arm64   static binaries (CGO_ENABLED=0)
#   hookonce_<package version>-1_<arch>.deb, hookonce-<package version>-1.<rpm arch>.rpm
#   SHA256SUMS                                                       of all of them
# The version is deploy/packages/version.sh's (X.Y.Z at the tag vX.Y.Z;
# else the last release +git<UTC time>.<commit>), stamped into the binary
# with -ldflags "-X main.version=<version> -X main.revision=<commit>".
# VERSION, OUT and ARCHES ("amd64 arm64") may be set. Usage:
#   deploy/release.sh
#   ARCHES=amd64 OUT=/tmp/rel deploy/release.sh
# Releasing: set VERSION and CHANGELOG.md's new section in one commit, tag
# it vX.Y.Z, run this on the tag, upload OUT's files.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=${VERSION:-$(deploy/packages/version.sh)}
REVISION=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
OUT=${OUT:-dist/$VERSION}
ARCHES=${ARCHES:-amd64 arm64}
deploy/packages/version.sh --package "$VERSION" >/dev/null # refuses what is no version

# At a tag the VERSION file must say the same: it is the base of every
# untagged build after it.
if tag=$(git describe --tags --exact-match --match 'v[0-9]*' 2>/dev/null); then
	if [ "${tag#v}" != "$(tr -d ' \n' <VERSION)" ]; then
		echo "release.sh: the tag is $tag but VERSION says $(cat VERSION)" >&2
		exit 1
	fi
fi

mkdir -p "$OUT"
for arch in $ARCHES; do
	bin=$OUT/hookonce-$VERSION-linux-$arch
	CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -buildvcs=false \
		-ldflags "-s -w -X main.version=$VERSION -X main.revision=$REVISION" -o "$bin" .
	HOOKONCE_BIN=$(realpath "$bin") VERSION=$VERSION GOARCH=$arch OUT=$OUT deploy/packages/build.sh
done
(cd "$OUT" && rm -f SHA256SUMS && sha256sum -- hookonce* >SHA256SUMS.tmp && mv SHA256SUMS.tmp SHA256SUMS)
echo "release $VERSION in $OUT:"
cat "$OUT/SHA256SUMS"
