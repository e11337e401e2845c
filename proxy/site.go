package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"sync"
	"syscall"
	"time"

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

// copyBuffers recycles the 32 KiB buffers answers are copied through (the
// pass-through's ReverseProxy, a capture's body), instead of allocating
// one per request.
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

// newForwards builds the two forwarders: pass, a ReverseProxy, streams
// requests that match no sender (and deliveries forwarded without a
// claim) untouched; capt forwards claimed deliveries into a capture.
func newForwards(site *url.URL, t http.RoundTripper, keepIdle time.Duration, client func(r *http.Request) (addr string, trusted bool), onPassError func(*http.Request, error)) (pass *httputil.ReverseProxy, capt *siteCall) {
	capt = &siteCall{site: site, client: client}
	pass = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			// The request the site gets, as a claimed forward's
			// (siteCall.request): site's URL with the query as it came,
			// the sender's Host, the client's address from hookonce.
			*pr.Out.URL = siteURL(site, pr.In.URL)
			pr.Out.Host = pr.In.Host
			capt.clientHeaders(pr.Out.Header, pr.In, nil)
		},
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
	capt.rt = t
	if ht, ok := t.(*http.Transport); ok {
		if site.Scheme == "http" {
			capt.rt = oneshot.New(newDialer().DialContext, keepIdle)
		} else {
			ht = ht.Clone()
			ht.DisableKeepAlives = true
			capt.rt = ht
		}
	}
	capt.direct = isOneShot(capt.rt)
	return pass, capt
}
