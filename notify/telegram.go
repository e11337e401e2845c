package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// TelegramAPI is the Bot API's address.
const TelegramAPI = "https://api.telegram.org"

// telegramMax is the Bot API's limit on a message's text.
const telegramMax = 4096

// Telegram sends through a bot with the Bot API's sendMessage: POST
// {APIURL}/bot{token}/sendMessage with {"chat_id", "text"}.
type Telegram struct {
	APIURL string // "" means TelegramAPI
	Token  string
	ChatID string // a number (a user, a group: -100…) or @channelname
	Client *http.Client
}

// Name implements Channel.
func (t *Telegram) Name() string { return "telegram" }

// String never shows the token.
func (t *Telegram) String() string { return "telegram chat " + t.ChatID }

// Send implements Channel.
func (t *Telegram) Send(ctx context.Context, m Message) error {
	text := m.Text
	if len(text) > telegramMax-10 {
		text = cut(text, telegramMax-10)
	}
	body := map[string]any{"text": text, "disable_web_page_preview": true}
	if id, err := strconv.ParseInt(t.ChatID, 10, 64); err == nil {
		body["chat_id"] = id
	} else {
		body["chat_id"] = t.ChatID
	}
	data, _ := json.Marshal(body)
	base := strings.TrimRight(t.APIURL, "/")
	if base == "" {
		base = TelegramAPI
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/bot"+t.Token+"/sendMessage", bytes.NewReader(data))
	if err != nil {
		return errors.New("telegram: the api_url does not make a request URL")
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client(t.Client).Do(req)
	if err != nil {
		return fmt.Errorf("telegram: %w", bareErr(err))
	}
	defer resp.Body.Close()
	var answer struct {
		OK          bool   `json:"ok"`
		Description string `json:"description"`
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(raw, &answer) != nil || !answer.OK || resp.StatusCode/100 != 2 {
		desc := answer.Description
		if desc == "" {
			desc = "no Bot API answer"
		}
		return fmt.Errorf("telegram answered %d: %s", resp.StatusCode, clean(desc, 200))
	}
	return nil
}

// bareErr drops the URL a net/http error quotes: the bot token is in the
// path, a webhook's URL may hold one in its query (trap 27's kind).
func bareErr(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", strings.ToLower(ue.Op), ue.Err)
	}
	return err
}

func client(c *http.Client) *http.Client {
	if c != nil {
		return c
	}
	return http.DefaultClient
}
