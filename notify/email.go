package notify

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/smtp"
	"strings"
	"time"
)

// Email sends through an SMTP server: STARTTLS (required unless
// PlainText), then AUTH PLAIN when a password is set, then one message
// to every address of To.
type Email struct {
	Addr     string // host:port of the SMTP server (587: submission)
	From     string
	To       []string
	Username string // "" : From
	Password string // "" : no AUTH (a local relay)
	// PlainText sends without STARTTLS: only for a relay on this host
	// (net/smtp refuses a password over it to another host anyway).
	PlainText bool
	// RootCAs verify the server's certificate; nil: the system's.
	RootCAs *x509.CertPool
	// HelloName is the name given in EHLO ("" : localhost).
	HelloName string
}

// Name implements Channel.
func (e *Email) Name() string { return "email" }

// String never shows the password.
func (e *Email) String() string { return "email via " + e.Addr }

// Send implements Channel.
func (e *Email) Send(ctx context.Context, m Message) error {
	host, _, err := net.SplitHostPort(e.Addr)
	if err != nil {
		return fmt.Errorf("email: smtp %q: want host:port", e.Addr)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", e.Addr)
	if err != nil {
		return fmt.Errorf("email: %w", err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	} else {
		_ = conn.SetDeadline(time.Now().Add(time.Minute))
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	c, err := smtp.NewClient(conn, host)
	if err != nil {
		return fmt.Errorf("email: %w", err)
	}
	defer c.Close()
	hello := e.HelloName
	if hello == "" {
		hello = "localhost"
	}
	if err := c.Hello(hello); err != nil {
		return fmt.Errorf("email: EHLO: %w", err)
	}
	if !e.PlainText {
		if ok, _ := c.Extension("STARTTLS"); !ok {
			return errors.New("email: the server does not offer STARTTLS (set tls: none only for a relay on this host)")
		}
		if err := c.StartTLS(&tls.Config{ServerName: host, RootCAs: e.RootCAs, MinVersion: tls.VersionTLS12}); err != nil {
			return fmt.Errorf("email: STARTTLS: %w", err)
		}
	}
	if e.Password != "" {
		user := e.Username
		if user == "" {
			user = e.From
		}
		if err := c.Auth(smtp.PlainAuth("", user, e.Password, host)); err != nil {
			return fmt.Errorf("email: AUTH: %w", err) // the server's words, never the password
		}
	}
	if err := c.Mail(e.From); err != nil {
		return fmt.Errorf("email: MAIL FROM: %w", err)
	}
	for _, to := range e.To {
		if err := c.Rcpt(to); err != nil {
			return fmt.Errorf("email: RCPT TO %s: %w", to, err)
		}
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("email: DATA: %w", err)
	}
	if _, err := w.Write(e.message(m)); err != nil {
		return fmt.Errorf("email: DATA: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("email: the server refused the message: %w", err)
	}
	_ = c.Quit()
	return nil
}

// message is the mail: headers, then the text as quoted-printable UTF-8.
func (e *Email) message(m Message) []byte {
	var b bytes.Buffer
	h := func(k, v string) { b.WriteString(k + ": " + v + "\r\n") }
	h("From", e.From)
	h("To", strings.Join(e.To, ", "))
	h("Subject", mime.QEncoding.Encode("utf-8", clean(m.Subject, 300)))
	h("Date", m.At.Format(time.RFC1123Z))
	dom := "hookonce.invalid"
	if i := strings.LastIndexByte(e.From, '@'); i >= 0 {
		dom = strings.Trim(e.From[i+1:], "<> ")
	}
	h("Message-ID", "<"+m.ID+"@"+dom+">")
	h("X-Hookonce-Kind", string(m.Kind))
	h("MIME-Version", "1.0")
	h("Content-Type", "text/plain; charset=utf-8")
	h("Content-Transfer-Encoding", "quoted-printable")
	b.WriteString("\r\n")
	q := quotedprintable.NewWriter(&b)
	_, _ = q.Write([]byte(strings.ReplaceAll(m.Text, "\n", "\r\n")))
	_ = q.Close()
	b.WriteString("\r\n")
	return b.Bytes()
}
