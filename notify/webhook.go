package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// Webhook posts each message as JSON signed as Standard Webhooks signs
// (webhook-id, webhook-timestamp, webhook-signature: v1,<base64 of
// HMAC-SHA256 over "id.timestamp.body">), so any receiver with a
// Standard Webhooks library can verify it. The id is the message's, the
// same on every try.
type Webhook struct {
	URL string
	// Secret is the key: the base64 after whsec_, decoded.
	Secret []byte
	Client *http.Client
	Now    func() time.Time // nil: time.Now
}

// Name implements Channel.
func (w *Webhook) Name() string { return "webhook" }

// String never shows the secret (nor the URL, which may hold a token).
func (w *Webhook) String() string { return "webhook" }

// webhookBody is what a receiver gets: type, timestamp and data, as
// Standard Webhooks suggests.
type webhookBody struct {
	Type      string      `json:"type"`
	Timestamp string      `json:"timestamp"`
	Data      webhookData `json:"data"`
}

type webhookData struct {
	ID       string         `json:"id"`
	Kind     string         `json:"kind"`
	Host     string         `json:"host"`
	Subject  string         `json:"subject"`
	Text     string         `json:"text"`
	Count    int            `json:"count"`
	Events   []webhookEvent `json:"events"`
	Commands []string       `json:"commands"`
}

type webhookEvent struct {
	Sender string `json:"sender,omitempty"`
	Key    string `json:"key,omitempty"`
	Reason string `json:"reason,omitempty"`
	Detail string `json:"detail,omitempty"`
	At     string `json:"at"`
}

// Send implements Channel.
func (w *Webhook) Send(ctx context.Context, m Message) error {
	d := webhookData{ID: m.ID, Kind: string(m.Kind), Host: m.Host, Subject: m.Subject, Text: m.Text, Count: m.Count,
		Events: []webhookEvent{}, Commands: m.Commands}
	if d.Commands == nil {
		d.Commands = []string{}
	}
	for _, e := range m.Events {
		d.Events = append(d.Events, webhookEvent{Sender: e.Sender, Key: e.Key, Reason: e.Reason, Detail: e.Detail, At: e.At.UTC().Format(time.RFC3339)})
	}
	body, err := json.Marshal(webhookBody{Type: "hookonce." + string(m.Kind), Timestamp: m.At.UTC().Format(time.RFC3339), Data: d})
	if err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	now := time.Now
	if w.Now != nil {
		now = w.Now
	}
	ts := strconv.FormatInt(now().Unix(), 10)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
	if err != nil {
		return errors.New("webhook: the url does not make a request")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("webhook-id", m.ID)
	req.Header.Set("webhook-timestamp", ts)
	req.Header.Set("webhook-signature", "v1,"+SignStandard(w.Secret, m.ID, ts, body))
	resp, err := client(w.Client).Do(req)
	if err != nil {
		return fmt.Errorf("webhook: %w", bareErr(err))
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("webhook: the receiver answered %d", resp.StatusCode)
	}
	return nil
}

// SignStandard is the base64 HMAC-SHA256 of "id.timestamp.body" under
// key, the v1 signature of Standard Webhooks.
func SignStandard(key []byte, id, ts string, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}
