#!/usr/bin/env bash
# Builds a hookonce release into OUT (default dist/<version>/):
#   hookonce-<version>-linux-amd64, hookonce-<version>-linux-arm64   static binaries (CGO_ENABLED=0)
#   hookonce_<package version>-1_<arch>.deb, hookonce-<package version>-1.<rpm arch>.rpm
#   SHA256SUMS                                                       of all of them
#   SHA256SUMS.sig                                                   its signature (OpenSSH, namespace "file")
# The version is deploy/packages/version.sh's (X.Y.Z at the tag vX.Y.Z;
# else the last release +git<UTC time>.<commit>), stamped into the binary
# with -ldflags "-X main.version=<version> -X main.revision=<commit>".
# VERSION, OUT and ARCHES ("amd64 arm64") may be set. Usage:
#   HOOKONCE_RELEASE_KEY=~/.ssh/hookonce-release deploy/release.sh
#   HOOKONCE_UNSIGNED=1 ARCHES=amd64 OUT=/tmp/rel deploy/release.sh
# Signing: HOOKONCE_RELEASE_KEY is the release key, an OpenSSH private key
# (or its .pub, the private key held by ssh-agent); ssh-keygen -Y sign
# signs SHA256SUMS with it as the principal release@hookonce, and the
# signature is checked against HOOKONCE_RELEASE_SIGNERS (default
# deploy/release.allowed_signers, the public key users verify with) before
# the release is called done. Without a key this script refuses to build,
# unless HOOKONCE_UNSIGNED=1 says an unsigned build is wanted (a local test
# build: no SHA256SUMS.sig). docs/deployment.md, "Releases".
# Releasing: set VERSION and CHANGELOG.md's new section in one commit, tag
# it vX.Y.Z, run this on the tag, upload OUT's files.
set -euo pipefail

# The signature's principal and namespace: the README's verify command names both.
PRINCIPAL=release@hookonce
NAMESPACE=file

# Paths the caller gave are theirs, relative to where they ran this.
KEY=${HOOKONCE_RELEASE_KEY:-}
[ -z "$KEY" ] || KEY=$(realpath -- "$KEY")
SIGNERS=${HOOKONCE_RELEASE_SIGNERS:-}
[ -z "$SIGNERS" ] || SIGNERS=$(realpath -- "$SIGNERS")
cd "$(dirname "$0")/.."
SIGNERS=${SIGNERS:-$PWD/deploy/release.allowed_signers}

# Refuse an unsigned release before building anything, and a key the
# published signers file does not list (users could not verify it).
if [ -n "$KEY" ]; then
	command -v ssh-keygen >/dev/null || {
		echo "release.sh: ssh-keygen (OpenSSH) is needed to sign SHA256SUMS" >&2
		exit 1
	}
	if [ ! -r "$KEY" ]; then
		echo "release.sh: HOOKONCE_RELEASE_KEY $KEY cannot be read" >&2
		exit 1
	fi
	case $KEY in
	*.pub) pub=$(cat -- "$KEY") ;;
	*) if [ -r "$KEY.pub" ]; then pub=$(cat -- "$KEY.pub"); else pub=$(ssh-keygen -y -f "$KEY"); fi ;;
	esac
	if [ ! -r "$SIGNERS" ]; then
		echo "release.sh: the signers file $SIGNERS cannot be read" >&2
		exit 1
	fi
	blob=$(echo "$pub" | awk '{print $2}')
	if [ -z "$blob" ] || ! grep -v '^[[:space:]]*#' -- "$SIGNERS" | grep -qF -- "$blob"; then
		echo "release.sh: the key $KEY is not in $SIGNERS, so nobody could verify its signature;" >&2
		echo "  add its line there (docs/deployment.md, Releases) or set HOOKONCE_RELEASE_SIGNERS" >&2
		exit 1
	fi
elif [ "${HOOKONCE_UNSIGNED:-}" != 1 ]; then
	echo "release.sh: HOOKONCE_RELEASE_KEY is not set: a release needs the release key to sign SHA256SUMS" >&2
	echo "  (HOOKONCE_UNSIGNED=1 builds an unsigned one, for local tests only)" >&2
	exit 1
fi

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
(cd "$OUT" && rm -f SHA256SUMS SHA256SUMS.sig && sha256sum -- hookonce* >SHA256SUMS.tmp && mv SHA256SUMS.tmp SHA256SUMS)
if [ -n "$KEY" ]; then
	ssh-keygen -q -Y sign -f "$KEY" -n "$NAMESPACE" "$OUT/SHA256SUMS"
	# As a user will: against the published signers, as the principal.
	if ! ssh-keygen -Y verify -f "$SIGNERS" -I "$PRINCIPAL" -n "$NAMESPACE" \
		-s "$OUT/SHA256SUMS.sig" <"$OUT/SHA256SUMS" >/dev/null; then
		rm -f "$OUT/SHA256SUMS.sig"
		echo "release.sh: SHA256SUMS.sig does not verify against $SIGNERS as $PRINCIPAL" >&2
		exit 1
	fi
	echo "release $VERSION in $OUT, SHA256SUMS signed by $PRINCIPAL:"
else
	echo "release $VERSION in $OUT, UNSIGNED (HOOKONCE_UNSIGNED=1): not for publishing:"
fi
cat "$OUT/SHA256SUMS"
