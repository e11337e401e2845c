package probe

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// record and conflict are the parts of the admin API's JSON the probe reads
// (docs/operations.md, "Record JSON").
type record struct {
	Sender   string `json:"sender"`
	Key      string `json:"key"`
	State    string `json:"state"`
	Response *struct {
		Status     int    `json:"status"`
		BodyBase64 string `json:"body_base64"`
		Truncated  bool   `json:"truncated"`
	} `json:"response"`
}

type conflict struct {
	Key string `json:"key"`
}

// counts are the store's records and conflicts of this run's two events.
type counts struct {
	records, conflicts int
	// changed are the keys the new event's other body was claimed under
	// (changed_payload: new_event): its key and the body's hash.
	changed []string
}

func (r *runner) admin(ctx context.Context, method, path string, query url.Values, out any) (int, error) {
	u := strings.TrimSuffix(r.cfg.Admin, "/") + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return 0, err
	}
	if r.cfg.AdminToken != "" {
		req.Header.Set("Authorization", "Bearer "+r.cfg.AdminToken)
	}
	if method != http.MethodGet {
		// An admin listener without a token takes a write (the probe's
		// DELETEs) only with this content type, which a cross-site form
		// cannot send (docs/operations.md, "Admin listener").
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode/100 != 2 {
		return resp.StatusCode, fmt.Errorf("%s %s: %d", method, path, resp.StatusCode)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

// counts lists the sender's recent records and conflicts and counts this
// run's (by their stored keys). Probe events are the newest, so the list
// limit does not hide them.
func (r *runner) counts(ctx context.Context) (counts, error) {
	var c counts
	var recs []record
	q := url.Values{"sender": {r.cfg.Sender}, "limit": {fmt.Sprint(adminListLimit)}}
	if _, err := r.admin(ctx, http.MethodGet, "/v1/events", q, &recs); err != nil {
		return c, err
	}
	for _, rec := range recs {
		switch {
		case rec.Key == r.newKey || rec.Key == r.parKey:
			c.records++
		case strings.HasPrefix(rec.Key, r.newKey+":payload-sha256="):
			c.records++
			c.changed = append(c.changed, rec.Key)
		}
	}
	var cs []conflict
	if _, err := r.admin(ctx, http.MethodGet, "/v1/conflicts", q, &cs); err != nil {
		return c, err
	}
	for _, x := range cs {
		if x.Key == r.newKey || x.Key == r.parKey {
			c.conflicts++
		}
	}
	return c, nil
}

func eventPath(sender, key string) string {
	return "/v1/events/" + url.PathEscape(sender) + "/" + url.PathEscape(key)
}

// checkStored compares the stored answer with the one the sender got.
func (r *runner) checkStored(ctx context.Context, key string, first reply) {
	var rec record
	_, err := r.admin(ctx, http.MethodGet, eventPath(r.cfg.Sender, key), nil, &rec)
	if err != nil {
		r.add("new event: stored answer", "state done, the site's answer", shortErr(err), false)
		return
	}
	obs := "state " + rec.State
	pass := rec.State == "done" && rec.Response != nil
	if rec.Response != nil {
		body, derr := base64.StdEncoding.DecodeString(rec.Response.BodyBase64)
		switch {
		case derr != nil:
			obs += ", body not base64"
			pass = false
		case rec.Response.Status != first.status:
			obs += fmt.Sprintf(", status %d", rec.Response.Status)
			pass = false
		case rec.Response.Truncated:
			obs += fmt.Sprintf(", %d, body truncated", rec.Response.Status)
		case !bytes.Equal(body, first.body):
			obs += fmt.Sprintf(", %d, body differs", rec.Response.Status)
			pass = false
		default:
			obs += fmt.Sprintf(", %d, same body", rec.Response.Status)
		}
	}
	r.add("new event: stored answer", "state done, the site's answer", obs, pass)
}

// release deletes every probe event and checks the counts went back.
func (r *runner) release(ctx context.Context) {
	var failed []string
	for _, k := range r.res.Keys {
		if _, err := r.admin(ctx, http.MethodDelete, eventPath(r.cfg.Sender, k), nil, nil); err != nil {
			failed = append(failed, shortErr(err))
		}
	}
	left, err := r.counts(ctx)
	obs := fmt.Sprintf("%d deleted, %d left", len(r.res.Keys)-len(failed), left.records)
	if err != nil {
		obs = shortErr(err)
	} else if len(failed) > 0 {
		obs += ": " + strings.Join(failed, "; ")
	}
	pass := err == nil && len(failed) == 0 && left.records == 0
	r.res.Released = pass
	r.add("probe events released", fmt.Sprintf("%d deleted, 0 left", len(r.res.Keys)), obs, pass)
}
