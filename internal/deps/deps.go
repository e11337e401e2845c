// Package deps pins the modules hookonce's packages are being built on, so
// that go.mod stays tidy while a backend is still being written. Remove an
// import here once a real package uses it.
package deps

import (
	_ "github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/redis/go-redis/v9"
	_ "github.com/tidwall/gjson"
	_ "github.com/urfave/cli/v2"
	_ "go.yaml.in/yaml/v3"
	_ "modernc.org/sqlite"
)
