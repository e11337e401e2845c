// Package stores is the proxy × store matrix (tests only): the real request
// path (proxy/proxytest) against each backend on a real server — the
// acceptance protocol, replica storms, outages, crashes, PgBouncer, and the
// failovers of PostgreSQL standbys and Redis Sentinel — so that the store
// packages' own tests never import proxy.
package stores
