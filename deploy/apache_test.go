package deploy_test

// The BitrixVM stack: nginx in front of Apache with mod_php. The front is a
// stand-in for BitrixVM's site server block with hookonce.conf's upstream
// and webhook locations added as hookonce.conf says; hookonce forwards to
// Apache, which runs apache/hookonce-remoteip.conf.

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hookonce/hookonce/internal/testkit/sitetest"
)

// bitrixVMFront is BitrixVM's site server block, cut down: its own proxy
// headers, every request proxied to Apache ($proxyserver, as in
// bx/conf/bitrix.conf), with hookonce.conf's upstream and webhook
// locations added before the include.
func bitrixVMFront(t *testing.T, listen, hookonce, apache string, paths []string) string {
	t.Helper()
	const name = "nginx/hookonce.conf"
	shipped := string(readFile(t, name))
	upstream := regexp.MustCompile(`(?s)upstream hookonce \{.*?\n\}`).FindString(shipped)
	upstream = mustReplace(t, name, upstream, "server 127.0.0.1:8080;", "server "+hookonce+";")
	var locs []string
	for _, p := range paths {
		locs = append(locs, webhookLocation(p))
	}
	return fmt.Sprintf(`%s

server {
    listen %s;
    proxy_set_header X-Real-IP $remote_addr;
    proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
    proxy_set_header Host $host:80;
    set $proxyserver "http://%s";

    %s

    # include bx/conf/bitrix.conf: PHP and the rest to Apache.
    location ~ \.php$ {
        proxy_pass $proxyserver;
    }
    location / {
        proxy_pass $proxyserver;
    }
}
`, upstream, listen, apache, strings.Join(locs, "\n    "))
}

// TestBitrixVMWithApache runs the spelling and address checks on the
// BitrixVM stack: front nginx → hookonce → Apache (mod_php, mod_remoteip
// with hookonce-remoteip.conf).
func TestBitrixVMWithApache(t *testing.T) {
	t.Setenv("SITE_TEST_STRIPE_SECRET", stripeSecret)
	site := sitetest.Start(t, sitetest.Options{Scripts: shopScripts})
	remoteip, err := filepath.Abs("apache/hookonce-remoteip.conf")
	if err != nil {
		t.Fatal(err)
	}
	apache := site.StartApache(t, "Include "+remoteip)
	ho := startHookonce(t, apache.URL, shopConfig)
	front := sitetest.StartNginx(t, sitetest.NginxOptions{
		HTTP: func(listen string) string {
			return bitrixVMFront(t, listen, strings.TrimPrefix(ho.URL, "http://"), apache.Addr, shopPaths)
		},
		Files: map[string]string{"hookonce-webhook.conf": string(readFile(t, "nginx/hookonce-webhook.conf"))},
	})

	t.Run("Spellings", func(t *testing.T) { runSpellingChecks(t, site, front.URL, ho.URL) })
	t.Run("SenderAddress", func(t *testing.T) { runAddressChecks(t, site, front.URL, ho.URL) })
	t.Run("ApacheTrustsOnlyLoopback", func(t *testing.T) {
		const id = "pay-apache-forged"
		r := send(t, apache.URL, "127.0.0.3", "POST", "/bitrix/tools/sale_ps_result.php",
			`{"object":{"id":"`+id+`"}}`, "X-Real-IP", "185.71.76.1")
		if runs := runsOf(t, site, id); r.status != 403 || len(runs) != 1 || runs[0].RemoteAddr != "127.0.0.3" {
			t.Fatalf("%d %s, runs %+v; want PHP to see 127.0.0.3 and refuse", r.status, r.body, runs)
		}
	})
}
