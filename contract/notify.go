package contract

import (
	"encoding/base64"
	"fmt"
	"net"
	"net/mail"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// The notify: block: where hookonce tells the operator what they must
// act on (Telegram, email, a signed webhook), with its secrets resolved
// as a signature's are (*_env, *_file). Decoding only: sending is
// internal/cli's and the notify package's, never the contract's.

type notifyFile struct {
	Telegram *struct {
		TokenEnv  string `yaml:"token_env"`
		TokenFile string `yaml:"token_file"`
		ChatID    string `yaml:"chat_id"`
		APIURL    string `yaml:"api_url"`
	} `yaml:"telegram"`
	Email *struct {
		SMTP         string   `yaml:"smtp"`
		From         string   `yaml:"from"`
		To           []string `yaml:"to"`
		Username     string   `yaml:"username"`
		PasswordEnv  string   `yaml:"password_env"`
		PasswordFile string   `yaml:"password_file"`
		TLS          string   `yaml:"tls"`
		CAFile       string   `yaml:"ca_file"`
	} `yaml:"email"`
	Webhook *struct {
		URL        string `yaml:"url"`
		SecretEnv  string `yaml:"secret_env"`
		SecretFile string `yaml:"secret_file"`
	} `yaml:"webhook"`
	DigestWait *Duration `yaml:"digest_wait"`
	Interval   *Duration `yaml:"interval"`
	Refusals   *struct {
		Count  *int      `yaml:"count"`
		Within *Duration `yaml:"within"`
	} `yaml:"refusals"`
	Queue *int `yaml:"queue"`
}

// Notify is the notify: block, checked, its secrets read. Zero durations
// and counts mean the notify package's defaults.
type Notify struct {
	Telegram *NotifyTelegram
	Email    *NotifyEmail
	Webhook  *NotifyWebhook
	// DigestWait, Interval: gather for this long; at most one message of
	// a kind per Interval.
	DigestWait, Interval time.Duration
	// RefusalCount refusals within RefusalWithin make a message.
	RefusalCount  int
	RefusalWithin time.Duration
	Queue         int
}

// NotifyTelegram is a bot and the chat it writes to.
type NotifyTelegram struct {
	APIURL string // "" : the Bot API's
	ChatID string
	token  string
}

// Token is the bot's token (never print it).
func (t *NotifyTelegram) Token() string { return t.token }

// NotifyEmail is an SMTP server and the addresses.
type NotifyEmail struct {
	Addr      string // host:port
	From      string
	To        []string
	Username  string
	PlainText bool   // tls: none
	CAFile    string // "" : the system's roots; made absolute
	password  string
}

// Password is the SMTP password, "" for none (never print it).
func (e *NotifyEmail) Password() string { return e.password }

// NotifyWebhook is a receiver and the Standard Webhooks key it verifies
// with.
type NotifyWebhook struct {
	URL    string
	secret []byte
}

// Secret is the signing key (the bytes after whsec_, decoded).
func (w *NotifyWebhook) Secret() []byte { return w.secret }

// compileNotify checks the notify: block (nil when absent).
func compileNotify(f *notifyFile, top *yaml.Node, e *Error, src secretSource) *Notify {
	if f == nil {
		return nil
	}
	bad := func(field, format string, a ...any) {
		field = "notify." + field
		e.add(Problem{Line: fieldLine(top, field), Field: field, Msg: fmt.Sprintf(format, a...)})
	}
	secret := func(envField, fileField, env, file string) string {
		switch {
		case env != "" && file != "":
			bad(envField, "set either %s or %s, not both", envField, fileField)
		case env != "":
			v, ok := src.env(env)
			if !ok {
				bad(envField, "environment variable %s is not set", env)
				return ""
			}
			if v = strings.TrimSpace(v); v == "" {
				bad(envField, "the secret is empty")
			}
			return v
		case file != "":
			path := file
			if !filepath.IsAbs(path) && src.dir != "" {
				path = filepath.Join(src.dir, path)
			}
			data, err := readSecretFile(path)
			if err != nil {
				bad(fileField, "read secret: %v", err)
				return ""
			}
			v := strings.TrimSpace(string(data))
			if v == "" {
				bad(fileField, "the secret is empty")
			}
			return v
		}
		return ""
	}
	n := &Notify{}
	if t := f.Telegram; t != nil {
		tok := secret("telegram.token_env", "telegram.token_file", t.TokenEnv, t.TokenFile)
		if t.TokenEnv == "" && t.TokenFile == "" {
			bad("telegram.token_env", "required: token_env or token_file (the bot's token from @BotFather)")
		} else if tok != "" && (strings.ContainsAny(tok, "/?# ") || !strings.Contains(tok, ":")) {
			bad("telegram.token_env", "not a bot token (digits, a colon, then letters: as @BotFather gives it)")
		}
		if strings.TrimSpace(t.ChatID) == "" {
			bad("telegram.chat_id", "required: the chat's id (a number, -100… for a group) or @channelname")
		}
		if t.APIURL != "" {
			if u, err := url.Parse(t.APIURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
				bad("telegram.api_url", "want an http(s) URL such as https://api.telegram.org")
			}
		}
		n.Telegram = &NotifyTelegram{APIURL: t.APIURL, ChatID: strings.TrimSpace(t.ChatID), token: tok}
	}
	if m := f.Email; m != nil {
		em := &NotifyEmail{Addr: m.SMTP, From: m.From, To: m.To, Username: m.Username}
		if _, port, err := net.SplitHostPort(m.SMTP); err != nil || port == "" {
			bad("email.smtp", "want host:port of the SMTP server, such as smtp.example.com:587")
		}
		if _, err := mail.ParseAddress(m.From); err != nil || m.From == "" {
			bad("email.from", "want an email address")
		}
		if len(m.To) == 0 {
			bad("email.to", "required: one or more email addresses")
		}
		for i, to := range m.To {
			if _, err := mail.ParseAddress(to); err != nil {
				bad(fmt.Sprintf("email.to[%d]", i), "%q is not an email address", to)
			}
		}
		switch m.TLS {
		case "", "starttls":
		case "none":
			em.PlainText = true
		default:
			bad("email.tls", "%q: want starttls (the default) or none (a relay on this host only)", m.TLS)
		}
		if m.CAFile != "" {
			em.CAFile = m.CAFile
			if !filepath.IsAbs(em.CAFile) && src.dir != "" {
				em.CAFile = filepath.Join(src.dir, em.CAFile)
			}
			if _, err := os.Stat(em.CAFile); err != nil {
				bad("email.ca_file", "%s", pathErr(err, em.CAFile))
			}
		}
		em.password = secret("email.password_env", "email.password_file", m.PasswordEnv, m.PasswordFile)
		n.Email = em
	}
	if w := f.Webhook; w != nil {
		wh := &NotifyWebhook{URL: w.URL}
		if u, err := url.Parse(w.URL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			bad("webhook.url", "want an http(s) URL")
		}
		raw := secret("webhook.secret_env", "webhook.secret_file", w.SecretEnv, w.SecretFile)
		if w.SecretEnv == "" && w.SecretFile == "" {
			bad("webhook.secret_env", "required: secret_env or secret_file (a Standard Webhooks secret, whsec_ and base64)")
		} else if raw != "" {
			key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(raw, "whsec_"))
			if err != nil || len(key) == 0 {
				bad("webhook.secret_env", "not a standard-webhooks secret (whsec_ followed by base64)")
			}
			wh.secret = key
		}
		n.Webhook = wh
	}
	if n.Telegram == nil && n.Email == nil && n.Webhook == nil {
		bad("telegram", "notify: names no channel (telegram, email or webhook)")
	}
	dur := func(field string, d *Duration, min time.Duration) time.Duration {
		if d == nil {
			return 0
		}
		if time.Duration(*d) < min {
			bad(field, "too short (minimum %s)", min)
		}
		return time.Duration(*d)
	}
	n.DigestWait = dur("digest_wait", f.DigestWait, 0)
	if f.DigestWait != nil && n.DigestWait == 0 {
		// 0s: send at once. notify's zero means its default (20s), so
		// the shortest wait it honours stands for none.
		n.DigestWait = time.Millisecond
	}
	n.Interval = dur("interval", f.Interval, time.Second)
	if r := f.Refusals; r != nil {
		if r.Count != nil {
			if *r.Count < 1 {
				bad("refusals.count", "must be at least 1")
			}
			n.RefusalCount = *r.Count
		}
		n.RefusalWithin = dur("refusals.within", r.Within, time.Second)
	}
	if f.Queue != nil {
		if *f.Queue < 1 {
			bad("queue", "must be at least 1")
		}
		n.Queue = *f.Queue
	}
	return n
}
