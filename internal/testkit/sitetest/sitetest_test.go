package sitetest_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookonce/hookonce/internal/testkit/sitetest"
)

const hook = `<?php
$id = sitetest_id($_GET['id'] ?? '');
file_put_contents(dirname($_SERVER['DOCUMENT_ROOT']) . '/data/last', $id);
header('Content-Type: text/plain');
echo "ran $id for {$_SERVER['REMOTE_ADDR']}\n";
`

// get sends a GET from the local address from ("" for any).
func get(t *testing.T, from, url string, header ...string) (int, string) {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second}
	if from != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
	}
	c := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}, Timeout: 10 * time.Second}
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestSiteRunsAndCountsPHP(t *testing.T) {
	s := sitetest.Start(t, sitetest.Options{Scripts: map[string]string{"hooks/a.php": hook}})

	t.Run("ScriptRunsAndIsRecorded", func(t *testing.T) {
		status, body := get(t, "127.0.0.2", s.URL+"/hooks/a.php?id=one", "Idempotency-Key", "shop:one")
		if status != 200 || body != "ran one for 127.0.0.2\n" {
			t.Fatalf("answer %d %q", status, body)
		}
		runs := s.Runs(t)
		want := sitetest.Run{Script: "/hooks/a.php", URI: "/hooks/a.php?id=one", Method: "GET", ID: "one",
			RemoteAddr: "127.0.0.2", IdempotencyKey: "shop:one", Status: 200}
		if len(runs) != 1 || runs[0] != want {
			t.Fatalf("runs = %+v, want [%+v]", runs, want)
		}
		if b, err := os.ReadFile(filepath.Join(s.Data, "last")); err != nil || string(b) != "one" {
			t.Fatalf("the worker could not write its data directory: %q %v", b, err)
		}
	})
	t.Run("PathInfoRunsTheScript", func(t *testing.T) {
		if status, _ := get(t, "", s.URL+"//hooks/./a.php/more/x.php?id=two"); status != 200 {
			t.Fatalf("status %d", status)
		}
		runs := s.Runs(t)
		if r := runs[len(runs)-1]; r.Script != "/hooks/a.php" || r.PathInfo != "/more/x.php" || r.ID != "two" {
			t.Fatalf("run = %+v", r)
		}
	})
	t.Run("MissingScriptIs404AndNoRun", func(t *testing.T) {
		before := len(s.Runs(t))
		if status, _ := get(t, "", s.URL+"/hooks/b.php?id=x"); status != 404 {
			t.Fatalf("status %d, want 404", status)
		}
		if n := len(s.Runs(t)) - before; n != 0 {
			t.Fatalf("%d runs for a missing script", n)
		}
	})
	t.Run("ParallelRunsAllRecorded", func(t *testing.T) {
		var wg sync.WaitGroup
		for i := range 12 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				get(t, "", fmt.Sprintf("%s/hooks/a.php?id=par-%d", s.URL, i%3))
			}()
		}
		wg.Wait()
		for i := range 3 {
			if n := s.Count(t, "/hooks/a.php", fmt.Sprintf("par-%d", i)); n != 4 {
				t.Errorf("par-%d ran %d times, want 4", i, n)
			}
		}
	})
}

func TestDirectivesAndOwnServer(t *testing.T) {
	t.Run("Directives", func(t *testing.T) {
		s := sitetest.Start(t, sitetest.Options{
			Scripts:    map[string]string{"a.php": hook},
			Directives: "set_real_ip_from 127.0.0.1;\n    real_ip_header X-Real-IP;",
		})
		if _, body := get(t, "127.0.0.1", s.URL+"/a.php?id=1", "X-Real-IP", "192.0.2.7"); body != "ran 1 for 192.0.2.7\n" {
			t.Fatalf("answer %q", body)
		}
		if _, body := get(t, "127.0.0.3", s.URL+"/a.php?id=2", "X-Real-IP", "192.0.2.7"); body != "ran 2 for 127.0.0.3\n" {
			t.Fatalf("an untrusted peer set REMOTE_ADDR: %q", body)
		}
	})
	t.Run("Server", func(t *testing.T) {
		s := sitetest.Start(t, sitetest.Options{
			Scripts: map[string]string{"a.php": hook},
			Server: func(c sitetest.Conf) string {
				return strings.Replace(sitetest.DefaultServer(c, ""), "location ~", "location = /up { return 200 up; }\n    location ~", 1)
			},
		})
		if status, body := get(t, "", s.URL+"/up"); status != 200 || body != "up" {
			t.Fatalf("own server block not used: %d %q", status, body)
		}
		if n := len(s.Runs(t)); n != 0 {
			t.Fatalf("%d runs", n)
		}
	})
}

func TestStartNginx(t *testing.T) {
	n := sitetest.StartNginx(t, sitetest.NginxOptions{
		HTTP:  func(listen string) string { return "server { listen " + listen + "; include extra.conf; }" },
		Files: map[string]string{"extra.conf": "location / { return 200 \"front $uri\"; }"},
	})
	if status, body := get(t, "", n.URL+"//a/./b/../c"); status != 200 || body != "front /a/c" {
		t.Fatalf("answer %d %q", status, body)
	}
}

func TestApacheServesTheSite(t *testing.T) {
	s := sitetest.Start(t, sitetest.Options{Scripts: map[string]string{"hooks/a.php": hook}})
	a := s.StartApache(t, "")
	status, body := get(t, "127.0.0.2", a.URL+"/hooks/a.php/more?id=ap", "Idempotency-Key", "shop:ap")
	if status != 200 || body != "ran ap for 127.0.0.2\n" {
		t.Fatalf("answer %d %q", status, body)
	}
	runs := s.Runs(t)
	if len(runs) != 1 || runs[0].Script != "/hooks/a.php" || runs[0].PathInfo != "/more" || runs[0].IdempotencyKey != "shop:ap" {
		t.Fatalf("runs = %+v", runs)
	}
}
