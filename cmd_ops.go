package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/urfave/cli/v2"

	"github.com/hookonce/hookonce/admin"
	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/proxy"
)

// purgeBatch bounds one Purge call, so an on-demand purge holds the store
// no longer than the background one does.
const purgeBatch = 1000

func conflictsCommand() *cli.Command {
	return &cli.Command{
		Name:  "conflicts",
		Usage: "list deliveries that reused a known key with another payload, newest first",
		Flags: []cli.Flag{storeFlag(), jsonFlag(),
			&cli.StringFlag{Name: "sender", EnvVars: []string{"HOOKONCE_SENDER"}, Usage: "only this sender"},
			&cli.IntFlag{Name: "limit", EnvVars: []string{"HOOKONCE_LIMIT"}, Value: 50, Usage: "at most this many"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 0 {
				return cli.Exit("usage: hookonce conflicts [--store DSN] [--json] [--sender S] [--limit N]", exitUsage)
			}
			if c.Int("limit") < 1 {
				return cli.Exit("--limit: want a positive number", exitUsage)
			}
			return withStore(c, readOnly, func(ctx context.Context, s dedupe.Store) error {
				cs, err := s.Conflicts(ctx, dedupe.ListFilter{Sender: c.String("sender"), Limit: c.Int("limit")})
				if err != nil {
					return cli.Exit(err.Error(), exitRuntime)
				}
				if c.Bool("json") {
					out := make([]dedupe.ConflictJSON, 0, len(cs))
					for _, cf := range cs {
						out = append(out, cf.JSON())
					}
					return printJSON(c.App.Writer, out)
				}
				printConflictTable(c.App.Writer, cs, time.Now())
				return nil
			})
		},
	}
}

func printConflictTable(w io.Writer, cs []dedupe.Conflict, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SENDER\tKEY\tAGE\tSTORED\tRECEIVED\tCHANGED")
	for _, cf := range cs {
		changed := "-"
		if len(cf.ChangedPaths) > 0 {
			changed = strings.Join(cf.ChangedPaths, ",")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", cf.Sender, cf.Key, admin.Age(now, cf.ReceivedAt),
			shortHash(cf.StoredHash), shortHash(cf.ReceivedHash), changed)
	}
	tw.Flush()
}

func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

func releaseCommand() *cli.Command {
	return &cli.Command{
		Name:      "release",
		Usage:     "free a stuck claim (processing or unknown) so the next delivery runs the site's handler",
		ArgsUsage: "SENDER KEY",
		Flags:     []cli.Flag{storeFlag(), jsonFlag()},
		Action: func(c *cli.Context) error {
			if c.NArg() != 2 {
				return cli.Exit("usage: hookonce release [--store DSN] SENDER KEY", exitUsage)
			}
			sender, key := c.Args().Get(0), c.Args().Get(1)
			return withStore(c, readWrite, func(ctx context.Context, s dedupe.Store) error {
				// Read first only to say what was released; Forget decides.
				rec, err := s.Get(ctx, sender, key)
				if err != nil && !errors.Is(err, dedupe.ErrNotFound) {
					return cli.Exit(err.Error(), exitRuntime)
				}
				err = s.Forget(ctx, sender, key)
				if errors.Is(err, dedupe.ErrNotFound) {
					return cli.Exit(fmt.Sprintf("no record for sender %q key %q", sender, key), exitNotFound)
				}
				if err != nil {
					return cli.Exit(err.Error(), exitRuntime)
				}
				if c.Bool("json") {
					return printJSON(c.App.Writer, map[string]any{"sender": sender, "key": key, "released": true, "state": rec.State})
				}
				fmt.Fprintf(c.App.Writer, "released %s/%s (was %s)\n", sender, key, rec.State)
				if rec.State == dedupe.StateDone {
					fmt.Fprintln(c.App.ErrWriter, "note: the record was done; the next delivery of this event runs the site's handler again")
				}
				return nil
			})
		},
	}
}

func purgeCommand() *cli.Command {
	return &cli.Command{
		Name: "purge",
		Usage: "delete records past their sender's ttl, or with --older-than those received longer ago; " +
			"a claim whose lease is alive is never touched",
		Flags: []cli.Flag{storeFlag(), jsonFlag(),
			&cli.DurationFlag{Name: "older-than", EnvVars: []string{"HOOKONCE_OLDER_THAN"}, Usage: "delete records received longer ago than this (e.g. 72h) instead of those past their ttl"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 0 {
				return cli.Exit("usage: hookonce purge [--store DSN] [--older-than DURATION]", exitUsage)
			}
			req := dedupe.PurgeRequest{Limit: purgeBatch}
			if c.IsSet("older-than") {
				d := c.Duration("older-than")
				if d <= 0 {
					return cli.Exit(fmt.Sprintf("--older-than %s: want a positive duration such as 72h", d), exitUsage)
				}
				req.ReceivedBefore = time.Now().Add(-d)
			}
			return withStore(c, readWrite, func(ctx context.Context, s dedupe.Store) error {
				total := 0
				for {
					n, err := s.Purge(ctx, req)
					total += n
					if err != nil {
						return cli.Exit(fmt.Sprintf("purge: %v (%d records removed before the failure)", err, total), exitRuntime)
					}
					if n < purgeBatch {
						break
					}
				}
				if c.Bool("json") {
					return printJSON(c.App.Writer, map[string]int{"purged": total})
				}
				fmt.Fprintf(c.App.Writer, "purged %d records\n", total)
				return nil
			})
		},
	}
}

// The admin listener that serve starts beside the proxy.

const defaultAdminListen = "127.0.0.1:9090"

func adminFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "admin-listen", Value: defaultAdminListen, EnvVars: []string{"HOOKONCE_ADMIN_LISTEN"},
			Usage: "address of the admin listener (metrics, health, API, /ui); a non-loopback address needs a token"},
		&cli.StringFlag{Name: "admin-token", EnvVars: []string{"HOOKONCE_ADMIN_TOKEN"},
			Usage: "bearer token the admin listener requires (prefer --admin-token-file: flags show in ps)"},
		&cli.StringFlag{Name: "admin-token-file", EnvVars: []string{"HOOKONCE_ADMIN_TOKEN_FILE"},
			Usage: "file holding the admin token (read whole, surrounding whitespace trimmed)"},
		&cli.DurationFlag{Name: "admin-write-probe-interval", Value: admin.DefaultProbeInterval,
			EnvVars: []string{"HOOKONCE_ADMIN_WRITE_PROBE_INTERVAL"},
			Usage:   "/readyz writes a probe to the store at most this often and answers from the last result in between"},
		&cli.DurationFlag{Name: "admin-session-ttl", Value: admin.DefaultSessionTTL, EnvVars: []string{"HOOKONCE_ADMIN_SESSION_TTL"},
			Usage: "how long a sign-in to the /ui page lasts"},
		&cli.BoolFlag{Name: "admin-secure-cookie", EnvVars: []string{"HOOKONCE_ADMIN_SECURE_COOKIE"},
			Usage: "mark the /ui session cookie Secure: set it when browsers reach the admin listener through a proxy that terminates TLS"},
	}
}

type adminConfig struct {
	listen        string
	token         string
	probeInterval time.Duration
	sessionTTL    time.Duration
	secureCookie  bool
}

// loadAdminConfig resolves the admin flags; its errors are usage errors
// (exit 2), and it refuses an unauthenticated admin listener that is
// reachable from other hosts.
func loadAdminConfig(c *cli.Context) (adminConfig, error) {
	ac := adminConfig{listen: c.String("admin-listen"), token: c.String("admin-token"),
		probeInterval: c.Duration("admin-write-probe-interval"), sessionTTL: c.Duration("admin-session-ttl"),
		secureCookie: c.Bool("admin-secure-cookie")}
	if ac.probeInterval <= 0 {
		return ac, fmt.Errorf("--admin-write-probe-interval %s: want a positive duration such as 5s", ac.probeInterval)
	}
	if ac.sessionTTL <= 0 {
		return ac, fmt.Errorf("--admin-session-ttl %s: want a positive duration such as 12h", ac.sessionTTL)
	}
	if file := c.String("admin-token-file"); file != "" {
		if ac.token != "" {
			return ac, errors.New("--admin-token and --admin-token-file: set one, not both")
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return ac, fmt.Errorf("--admin-token-file: %w", err)
		}
		ac.token = strings.TrimSpace(string(b))
		if ac.token == "" {
			return ac, fmt.Errorf("--admin-token-file %s: the file is empty", file)
		}
	}
	if ac.listen == "" {
		return ac, errors.New("--admin-listen: want host:port, e.g. " + defaultAdminListen)
	}
	if ac.token == "" && !admin.IsLoopback(ac.listen) {
		return ac, fmt.Errorf("--admin-listen %s is not a loopback address and no admin token is set: "+
			"set --admin-token-file (or HOOKONCE_ADMIN_TOKEN), or listen on 127.0.0.1", ac.listen)
	}
	return ac, nil
}

func startAdmin(ac adminConfig, store dedupe.Store, p *proxy.Proxy, reg *prometheus.Registry, log *slog.Logger) (*admin.Server, error) {
	alog := log.With("component", "admin")
	h, err := admin.New(admin.Options{Store: store, Gatherer: reg, Token: ac.token, Logger: alog,
		ProbeInterval: ac.probeInterval, SessionTTL: ac.sessionTTL, SecureCookie: ac.secureCookie,
		Unretried: func(ctx context.Context, sender string) ([]dedupe.Record, error) {
			return p.Unretried(ctx, sender, time.Now())
		},
		Redeliver: func(ctx context.Context, sender, key string, force bool) (admin.Redelivery, error) {
			res, err := p.Redeliver(ctx, sender, key, force)
			for _, refusal := range []error{proxy.ErrNotKept, proxy.ErrDone, proxy.ErrInProgress, proxy.ErrNoSender} {
				if errors.Is(err, refusal) {
					return admin.Redelivery{}, fmt.Errorf("%w: %w", admin.ErrRefused, err)
				}
			}
			if err != nil {
				return admin.Redelivery{}, err
			}
			return admin.Redelivery{Outcome: res.Outcome, Status: res.Status, Body: string(res.Body)}, nil
		},
	})
	if err != nil {
		return nil, err
	}
	as, err := admin.Listen(ac.listen, h, alog)
	if err != nil {
		return nil, err
	}
	log.Info("admin listener serving", "listen", as.Addr().String(), "auth", ac.token != "")
	return as, nil
}

func stopAdmin(as *admin.Server, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := as.Shutdown(ctx); err != nil {
		log.Warn("admin listener stopped", "err", err)
	}
}
