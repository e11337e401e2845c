package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/hookonce/hookonce/contract"
	"github.com/hookonce/hookonce/proxy/internal/oneshot"
)

// ending is how a forward ended (not the logged outcome, which
// decideForward derives from it).
type ending int

const (
	answered      ending = iota // the site answered; see capture.status
	unreachable                 // no byte of the request reached the site (a dial failure, a failure before the first byte)
	timedOut                    // upstream_timeout passed after the request started: the site may have run
	broken                      // the connection broke after the request started, and no answer could be read
	aborted                     // hookonce is shutting down; the request never reached the site
	abortedAtSite               // hookonce is shutting down; the site had the request
)

var endings = [...]string{answered: "answered", unreachable: "unreachable", timedOut: "timed_out", broken: "broken", aborted: "aborted", abortedAtSite: "aborted_at_site"}

func (e ending) String() string {
	if int(e) < len(endings) {
		return endings[e]
	}
	return fmt.Sprintf("ending(%d)", int(e))
}

// classify says how a forward ended; started tells whether any byte of
// the request may have reached the site (requestStarted). A started
// request is never unreachable: the site may have read enough to run the
// handler, so with no answer the outcome is ambiguous (row 10a). (An
// answer read after a failed write is an answer: err is nil.)
func classify(ctx context.Context, abortCtx context.Context, err error, started bool) ending {
	switch {
	case err == nil:
		return answered
	case abortCtx.Err() != nil && started:
		return abortedAtSite
	case abortCtx.Err() != nil:
		return aborted
	case !started || isDialError(err):
		return unreachable
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded):
		return timedOut
	default:
		return broken
	}
}

// isDialError reports whether err happened while connecting, before any
// byte of the request was written.
func isDialError(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns) || errors.Is(err, syscall.ECONNREFUSED)
}

// newTransport is tuned for one site on the same host: many idle
// connections, no transparent compression (bodies are stored as the site
// sent them).
func newTransport() *http.Transport {
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           newDialer().DialContext,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		DisableCompression:    true,
		ExpectContinueTimeout: time.Second,
	}
}

func newDialer() *net.Dialer {
	return &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
}

// copyBuffers recycles the 32 KiB buffers ReverseProxy copies bodies
// through, instead of allocating one per request.
var copyBuffers = &bufferPool{pool: sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}}

type bufferPool struct{ pool sync.Pool }

func (p *bufferPool) Get() []byte  { return *p.pool.Get().(*[]byte) }
func (p *bufferPool) Put(b []byte) { p.pool.Put(&b) }

// emptyBody is a body of no bytes that the transport cannot rewind.
type emptyBody struct{}

func (emptyBody) Read([]byte) (int, error) { return 0, io.EOF }
func (emptyBody) Close() error             { return nil }

func peerIP(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		return remoteAddr
	}
	return host
}

// isTimeout reports whether reading the sender's body hit its deadline.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// newReverseProxies builds the two forwarders: pass streams requests that
// match no sender untouched; capture forwards webhook deliveries into a
// capture.
func newReverseProxies(site *url.URL, t http.RoundTripper, keepIdle time.Duration, client func(r *http.Request) (addr string, trusted bool), onPassError func(*http.Request, error)) (pass, capt *httputil.ReverseProxy) {
	rewrite := func(pr *httputil.ProxyRequest) {
		pr.SetURL(site)
		// ReverseProxy re-encodes a query that net/url cannot parse (a
		// stray "%", ";"), dropping and reordering fields: the site would
		// read another query than the one judged. Send it as it came.
		switch {
		case site.RawQuery == "":
			pr.Out.URL.RawQuery = pr.In.URL.RawQuery
		case pr.In.URL.RawQuery != "":
			pr.Out.URL.RawQuery = site.RawQuery + "&" + pr.In.URL.RawQuery
		}
		pr.Out.Host = pr.In.Host // legacy sites route by virtual host
		// The site learns the client's address from hookonce alone (trap
		// 23): every header a site or a PHP library reads it from is
		// dropped, then X-Real-IP and X-Forwarded-For say the address
		// hookonce judged — the peer, or from a trusted proxy (the site's
		// own nginx) the client that proxy reported — followed in
		// X-Forwarded-For by the trusted proxy itself.
		addr, fromTrusted := client(pr.In)
		peer := peerIP(pr.In.RemoteAddr)
		contract.DropClientAddrHeaders(pr.Out.Header)
		if fromTrusted && addr != peer {
			pr.Out.Header.Set("X-Forwarded-For", addr)
		}
		pr.SetXForwarded()
		if fromTrusted {
			for _, h := range []string{"X-Forwarded-Host", "X-Forwarded-Proto"} {
				if v := pr.In.Header.Get(h); v != "" {
					pr.Out.Header.Set(h, v)
				}
			}
		}
		pr.Out.Header.Set("X-Real-Ip", addr)
	}
	pass = &httputil.ReverseProxy{
		Rewrite:    rewrite,
		Transport:  t,
		BufferPool: copyBuffers,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			onPassError(r, err)
			answerPassThroughError(w)
		},
	}
	// A webhook forward never goes out on a connection the site may be
	// closing at that very moment (an idle timeout): a request written into
	// a dying connection cannot be told from one the handler ran. To an
	// http:// site it is oneShot's: a connection of its own, or one kept
	// from the last answer only while it provably is not dying (trap 32),
	// and no transport machinery; to an https:// one, the transport's with
	// keep-alives off.
	ct := t
	if ht, ok := t.(*http.Transport); ok {
		if site.Scheme == "http" {
			ct = oneshot.New(newDialer().DialContext, keepIdle)
		} else {
			ht = ht.Clone()
			ht.DisableKeepAlives = true
			ct = ht
		}
	}
	capt = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			rewrite(pr)
			// Trap 1 (ARCHITECTURE.md): a request with GetBody and an Idempotency-Key is
			// resent by the transport on its own after a failure on a
			// reused connection. Never make it replayable.
			pr.Out.GetBody = nil
			// ReverseProxy turns an empty body into nil, and a nil body
			// with an Idempotency-Key is replayable to the transport too.
			if pr.Out.Body == nil {
				pr.Out.Body = emptyBody{}
			}
			pr.Out.Header.Del("Expect")
			if c, ok := pr.Out.Context().Value(captureKey{}).(*capture); ok && c.keyHeader != "" {
				contract.DropHeader(pr.Out.Header, c.keyHeader) // a client's, under any spelling
				pr.Out.Header.Set(c.keyHeader, c.keyValue)
			}
		},
		Transport:  ct,
		BufferPool: copyBuffers,
		ModifyResponse: func(resp *http.Response) error {
			if c, ok := resp.Request.Context().Value(captureKey{}).(*capture); ok {
				resp.Body = bodyWatch{ReadCloser: resp.Body, c: c}
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if c, ok := w.(*capture); ok {
				c.setErr(err)
			}
		},
		// Errors are recorded in the capture and logged once, with the
		// decision.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	return pass, capt
}
