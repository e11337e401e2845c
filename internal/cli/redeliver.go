package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hookonce/hookonce/admin"
	"github.com/hookonce/hookonce/dedupe/view"
)

// redeliverCommand asks a running hookonce serve (through its admin API)
// to send stored events to the site again: the operator's way to complete
// an event whose sender stopped retrying.
func redeliverCommand() *cli.Command {
	return &cli.Command{
		Name:      "redeliver",
		Usage:     "send a stored event to the site again through the running serve (its admin API); needs store_request_body",
		ArgsUsage: "SENDER KEY | --status unretried [--sender S] [--since D]",
		Flags: append(adminFlags(),
			&cli.BoolFlag{Name: "force", EnvVars: []string{"HOOKONCE_FORCE"}, Usage: "redeliver a done event too (runs the handler again; logged)"},
			&cli.StringFlag{Name: "status", EnvVars: []string{"HOOKONCE_STATUS"}, Usage: "unretried: every event whose sender gave up"},
			&cli.StringFlag{Name: "sender", EnvVars: []string{"HOOKONCE_SENDER"}, Usage: "with --status: only this sender"},
			&cli.DurationFlag{Name: "since", EnvVars: []string{"HOOKONCE_SINCE"}, Usage: "with --status: only events last tried within this long"},
		),
		Action: runRedeliver,
	}
}

func runRedeliver(c *cli.Context) error {
	const usage = "usage: hookonce redeliver [--admin URL] [--force] SENDER KEY | --status unretried [--sender S] [--since D]"
	api, err := newAdminClient(c)
	if err != nil {
		return err
	}
	var targets [][2]string
	switch {
	case c.String("status") == "" && c.NArg() == 2:
		targets = append(targets, [2]string{c.Args().Get(0), c.Args().Get(1)})
	case c.String("status") == "unretried" && c.NArg() == 0:
		recs, err := api.unretried(c.Context, c.String("sender"))
		if err != nil {
			return cli.Exit(err.Error(), exitRuntime)
		}
		for _, r := range recs {
			last := r.ReceivedAt
			if n := len(r.Attempts); n > 0 {
				last = r.Attempts[n-1].At
			}
			if since := c.Duration("since"); since > 0 && time.Since(last) > since {
				continue
			}
			targets = append(targets, [2]string{r.Sender, r.Key})
		}
		if len(targets) == 0 {
			fmt.Fprintln(c.App.Writer, "no unretried events")
			return nil
		}
	default:
		return cli.Exit(usage, exitUsage)
	}
	failed := 0
	for _, t := range targets {
		res, err := api.redeliver(c.Context, t[0], t[1], c.Bool("force"))
		if err != nil {
			failed++
			fmt.Fprintf(c.App.ErrWriter, "%s %s: %v\n", t[0], t[1], err)
			continue
		}
		fmt.Fprintf(c.App.Writer, "%s %s: %s (status %d)\n", t[0], t[1], res.Outcome, res.Status)
	}
	if failed > 0 {
		return cli.Exit(fmt.Sprintf("%d of %d redeliveries failed", failed, len(targets)), exitRuntime)
	}
	return nil
}

// adminClient speaks to the admin API of a running serve.
type adminClient struct {
	base, token string
}

// adminFlags say where the admin API of a running serve is and its token.
func adminFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "admin", EnvVars: []string{"HOOKONCE_ADMIN"}, Usage: "the admin listener of hookonce serve (default: from HOOKONCE_ADMIN_LISTEN, else the host's http://" + host.AdminListen + " with its config, else http://" + defaultAdminListen + ")"},
		&cli.StringFlag{Name: "admin-token", EnvVars: []string{"HOOKONCE_ADMIN_TOKEN"}, Usage: "bearer token for the admin API (prefer --admin-token-file)"},
		&cli.StringFlag{Name: "admin-token-file", EnvVars: []string{"HOOKONCE_ADMIN_TOKEN_FILE"}, Usage: "file holding the admin token"},
	}
}

// newAdminClient reads adminFlags, finding the admin listener and its
// token as the operator's commands find the host's config (config.go).
func newAdminClient(c *cli.Context) (adminClient, error) {
	token, err := operatorAdminToken(c)
	if err != nil {
		return adminClient{}, cli.Exit(err.Error(), exitUsage)
	}
	base := c.String("admin")
	if base == "" {
		if base, err = operatorAdmin(c); err != nil {
			return adminClient{}, cli.Exit(err.Error(), exitUsage)
		}
	}
	return adminClient{base: strings.TrimRight(base, "/"), token: token}, nil
}

func (a adminClient) do(ctx context.Context, method, path string, out any) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, nil)
	if err != nil {
		return err
	}
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	if method != http.MethodGet {
		// Without a token, serve's admin listener takes a write only with
		// this content type (a cross-site form cannot send it).
		req.Header.Set("Content-Type", admin.APIWriteContentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("admin API: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		var p struct{ Title, Detail string }
		if json.Unmarshal(body, &p) == nil && p.Title != "" {
			return &apiError{status: resp.StatusCode, msg: fmt.Sprintf("%s: %s", p.Title, p.Detail)}
		}
		return &apiError{status: resp.StatusCode, msg: "admin API: " + resp.Status}
	}
	return json.Unmarshal(body, out)
}

// apiError is a refusal of the admin API, with its status for callers
// that tell them apart.
type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func (a adminClient) unretried(ctx context.Context, sender string) ([]view.RecordJSON, error) {
	q := url.Values{"status": {"unretried"}, "limit": {"1000"}}
	if sender != "" {
		q.Set("sender", sender)
	}
	var out []view.RecordJSON
	return out, a.do(ctx, http.MethodGet, "/v1/events?"+q.Encode(), &out)
}

func (a adminClient) redeliver(ctx context.Context, sender, key string, force bool) (admin.Redelivery, error) {
	path := "/v1/redeliver/" + url.PathEscape(sender) + "/" + url.PathEscape(key)
	if force {
		path += "?force=true"
	}
	var out admin.Redelivery
	return out, a.do(ctx, http.MethodPost, path, &out)
}
