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
# Every build tag the code has: benchcompare marks bench/compare (it
# starts servers and imports test helpers, so the plain build leaves it out).
for tags in "" benchcompare; do
  go vet -tags "$tags" ./...
  # staticcheck, pinned by the tool directive in go.mod.
  go tool staticcheck -tags "$tags" ./...
done
CGO_ENABLED=0 go build -o /dev/null .   # the static binary keeps building
# Deployment files (deploy/): compose validates without an engine; the
# Kubernetes manifests are decoded strictly into k8s.io/api types by their
# own module, so hookonce's go.mod gets no k8s dependencies.
if command -v docker-compose >/dev/null 2>&1; then
  docker-compose -f deploy/compose/docker-compose.yml config -q
elif [ "${CI:-}" = true ]; then
  echo "docker-compose is missing (CI installs it)" >&2; exit 1
fi
(cd deploy/kubernetes/validate && go vet ./... && go test -count=1 ./...)
go test -race -count=1 -timeout 40m ./...
# The delivery's allocation budgets, held without -race (the race detector
# allocates on its own behalf): bench/alloc_test.go.
go test -count=1 -run '^TestDeliveryAllocationBudget$' ./bench
