package proxy_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/hookonce/hookonce/contract"
	"github.com/hookonce/hookonce/dedupe/sqlite"
	"github.com/hookonce/hookonce/proxy"
)

// A proxy in front of a site: the same event delivered three times runs
// the site's handler once; the repeats get the stored answer.
func Example() {
	var runs atomic.Int32
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		_, _ = io.WriteString(w, "order created")
	}))
	defer site.Close()

	dir, _ := os.MkdirTemp("", "hookonce-example")
	defer os.RemoveAll(dir)
	store, err := sqlite.Open(context.Background(), filepath.Join(dir, "hookonce.db"))
	if err != nil {
		panic(err)
	}
	defer store.Close()
	rules, err := contract.Parse([]byte(`
senders:
  - name: shop
    match: { path: /hooks/order.php }
    key: [ { body: id } ]
`), "example.yaml")
	if err != nil {
		panic(err)
	}
	upstream, _ := url.Parse(site.URL)
	p, err := proxy.New(proxy.Options{Upstream: upstream, Contract: rules, Store: store})
	if err != nil {
		panic(err)
	}
	defer p.Close(context.Background())
	front := httptest.NewServer(p)
	defer front.Close()

	for range 3 {
		resp, err := http.Post(front.URL+"/hooks/order.php", "application/json", strings.NewReader(`{"id":"ord-1"}`))
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%d %q replayed=%q\n", resp.StatusCode, body, resp.Header.Get(proxy.ReplayHeader))
	}
	fmt.Println("handler runs:", runs.Load())
	// Output:
	// 200 "order created" replayed=""
	// 200 "order created" replayed="true"
	// 200 "order created" replayed="true"
	// handler runs: 1
}
