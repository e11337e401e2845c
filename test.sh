#!/usr/bin/env bash
# The one command that runs every test (see README). Tests start what they
# need themselves: a throwaway PostgreSQL and redis-server on loopback,
# headless Chromium for the inspection page. With CI=true a missing server
# binary fails the run instead of skipping.
set -euo pipefail
cd "$(dirname "$0")"

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.git/*'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi
go vet ./...
CGO_ENABLED=0 go build -o /dev/null .   # the static binary keeps building
go test -race -count=1 -timeout 40m ./...
