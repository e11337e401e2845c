// Package smtptest is a small SMTP server on loopback for tests: EHLO,
// STARTTLS (a certificate of its own, whose CA a test trusts), AUTH
// PLAIN, MAIL, RCPT, DATA; it keeps each message it took and can refuse
// them for a while (a relay that is down).
package smtptest

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Message is one mail the server took.
type Message struct {
	From string
	To   []string
	Data string // headers and body as sent, CRLF line ends, dot-unstuffed
	TLS  bool   // sent after STARTTLS
	User string // AUTH PLAIN's user ("" : no AUTH)
	Pass string
}

// Server is a running SMTP server.
type Server struct {
	Addr   string         // 127.0.0.1:port
	Pool   *x509.CertPool // trusts the server's certificate
	CAFile string         // the same certificate, as a PEM file
	// NoSTARTTLS: the server does not offer STARTTLS.
	NoSTARTTLS bool

	cert tls.Certificate
	mu   sync.Mutex
	msgs []Message
	fail int // DATA refusals still to give
	got  chan struct{}
}

// Start runs a server until t ends.
func Start(t *testing.T) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Addr: ln.Addr().String(), got: make(chan struct{}, 1000)}
	s.selfSign(t)
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); s.serve(c) }()
		}
	}()
	return s
}

// FailNext makes the next n messages be refused at the end of DATA (451).
func (s *Server) FailNext(n int) {
	s.mu.Lock()
	s.fail = n
	s.mu.Unlock()
}

// Messages returns the messages taken so far.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.msgs...)
}

// Wait returns once n messages were taken, or fails the test after d.
func (s *Server) Wait(t *testing.T, n int, d time.Duration) []Message {
	t.Helper()
	deadline := time.After(d)
	for {
		if m := s.Messages(); len(m) >= n {
			return m
		}
		select {
		case <-s.got:
		case <-deadline:
			t.Fatalf("smtptest: %d messages after %s, want %d", len(s.Messages()), d, n)
		}
	}
}

func (s *Server) selfSign(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "smtptest"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	s.Pool = x509.NewCertPool()
	s.Pool.AddCert(cert)
	s.cert = tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	s.CAFile = filepath.Join(t.TempDir(), "smtptest-ca.pem")
	if err := os.WriteFile(s.CAFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func (s *Server) serve(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	r, w := bufio.NewReader(c), bufio.NewWriter(c)
	say := func(line string) { w.WriteString(line + "\r\n"); w.Flush() }
	say("220 smtptest ready")
	var m Message
	tlsOn := false
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimRight(line, "\r\n")
		verb := strings.ToUpper(strings.SplitN(line, " ", 2)[0])
		switch verb {
		case "EHLO", "HELO":
			w.WriteString("250-smtptest\r\n")
			if !s.NoSTARTTLS && !tlsOn {
				w.WriteString("250-STARTTLS\r\n")
			}
			say("250 AUTH PLAIN")
		case "STARTTLS":
			if s.NoSTARTTLS || tlsOn {
				say("502 no")
				continue
			}
			say("220 go ahead")
			tc := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{s.cert}})
			if tc.Handshake() != nil {
				return
			}
			c, tlsOn = tc, true
			r, w = bufio.NewReader(c), bufio.NewWriter(c)
		case "AUTH":
			f := strings.Fields(line)
			if len(f) != 3 || strings.ToUpper(f[1]) != "PLAIN" {
				say("504 PLAIN only")
				continue
			}
			raw, err := base64.StdEncoding.DecodeString(f[2])
			parts := strings.Split(string(raw), "\x00")
			if err != nil || len(parts) != 3 {
				say("501 bad AUTH")
				continue
			}
			m.User, m.Pass = parts[1], parts[2]
			say("235 ok")
		case "MAIL":
			m.From, m.To = addr(line), nil
			say("250 ok")
		case "RCPT":
			m.To = append(m.To, addr(line))
			say("250 ok")
		case "DATA":
			say("354 go on")
			var b strings.Builder
			for {
				l, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if l == ".\r\n" {
					break
				}
				b.WriteString(strings.TrimPrefix(l, "."))
			}
			m.Data, m.TLS = b.String(), tlsOn
			s.mu.Lock()
			refuse := s.fail > 0
			if refuse {
				s.fail--
			} else {
				s.msgs = append(s.msgs, m)
			}
			s.mu.Unlock()
			if refuse {
				say("451 try again later")
				continue
			}
			say("250 taken")
			s.got <- struct{}{}
		case "RSET", "NOOP":
			say("250 ok")
		case "QUIT":
			say("221 bye")
			return
		default:
			say("502 unknown")
		}
	}
}

func addr(line string) string {
	i, j := strings.IndexByte(line, '<'), strings.IndexByte(line, '>')
	if i < 0 || j < i {
		return ""
	}
	return line[i+1 : j]
}
