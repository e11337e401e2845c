#!/usr/bin/env bash
# hookonce's version, for the binary (-X main.version) and the packages.
#
#   deploy/packages/version.sh              the checkout's version
#   deploy/packages/version.sh --package V  V as a .deb/.rpm version
#
# A checkout at the tag vX.Y.Z with no local changes is X.Y.Z. Anything
# else is the last release (the newest tag vX.Y.Z reachable from HEAD, or
# the VERSION file when there is none) followed by +git<UTC time>.<commit>:
# the commit's time, or the time of the build when the tree has local
# changes (then .dirty). A local change is any change git status shows:
# to a tracked file, staged or not, or a file git does not track and does
# not ignore (a new source file is built into the binary as much as an
# edited one is). So an untagged build sorts after the release it
# follows, before the next one, and after every earlier untagged build, in
# dpkg's order and in rpm's (deploy/release_test.go checks both).
#
# Package versions: semantic versions, with a pre-release's "-" as "~"
# (1.1.0-rc.1 → 1.1.0~rc.1, which dpkg and rpm sort before 1.1.0).
set -euo pipefail

if [ "${1:-}" = --package ]; then
	v=${2#v}
	v=${v//-/\~}
	if [[ ! $v =~ ^[0-9]+\.[0-9]+\.[0-9]+([~+][0-9A-Za-z.~+]*)?$ ]]; then
		echo "version.sh: $2 is not a version X.Y.Z[-pre][+build]" >&2
		exit 2
	fi
	echo "$v"
	exit 0
fi

cd "$(dirname "$0")/../.."
base=$(tr -d ' \n' <VERSION)
if ! git rev-parse --verify -q HEAD >/dev/null 2>&1; then
	echo "$base+src$(date -u +%Y%m%d%H%M%S)"
	exit 0
fi
# A status git cannot give is no proof of a clean tree: stop.
if ! changes=$(git status --porcelain --untracked-files=normal); then
	echo "version.sh: git status failed; cannot tell whether the tree has local changes" >&2
	exit 1
fi
if [ -z "$changes" ]; then
	dirty=
	when=$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y%m%d%H%M%S)
	if tag=$(git describe --tags --exact-match --match 'v[0-9]*' 2>/dev/null); then
		echo "${tag#v}"
		exit 0
	fi
else
	dirty=.dirty
	when=$(date -u +%Y%m%d%H%M%S)
fi
if tag=$(git describe --tags --abbrev=0 --match 'v[0-9]*' 2>/dev/null); then
	base=${tag#v}
fi
echo "$base+git$when.$(git rev-parse --short=7 HEAD)$dirty"
