package main

// Names of the deployment mode's paths (deploy.go), which its smoke test
// (deploy_test.go, built without the benchcompare tag) looks for.
const (
	dName        = "direct to the site"
	dBare        = "bare httputil.ReverseProxy (own process)"
	dNginx       = "nginx proxy_pass, upstream keepalive 64"
	dPass        = "hookonce serve: pass-through"
	dDup         = "hookonce serve: duplicates (replay cache)"
	dNewPG       = "hookonce serve: new events, PostgreSQL"
	dNewSQ       = "hookonce serve: new events, SQLite (synchronous=FULL, default)"
	dNewSQNormal = "hookonce serve: new events, SQLite ?synchronous=normal"
	dPgbench     = "floor: hookonce's new-event statements, pgbench -M prepared -c %d -j 2"
	dPgbenchRate = "floor: hookonce's new-event statements, pgbench -M prepared -R %.0f"
	dOpenDirect  = "direct to the site"
	dOpenNewPG   = "hookonce serve: new events, PostgreSQL"
	// The durable acknowledgement's cost (ack: durable) against a
	// synchronous claim, both on SQLite's default.
	dNewSQDurable     = "hookonce serve: new events, SQLite, ack: durable"
	dOpenNewSQ        = "hookonce serve: new events, SQLite (synchronous=FULL)"
	dOpenNewSQDurable = "hookonce serve: new events, SQLite, ack: durable"
	// Issue 46: a notify channel down, beside none (notifydown.go).
	dOpenMixSQ     = "hookonce serve: new events, 1 in 10 refused, SQLite, no notify"
	dOpenMixNotify = "hookonce serve: new events, 1 in 10 refused, SQLite, notify channels down"
)
