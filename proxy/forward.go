package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hookonce/hookonce/contract"
)

// capture is the http.ResponseWriter the forwarding ReverseProxy writes
// into: the site's answer is held so it can be judged and stored before
// the sender sees it. At most limit bytes are held: a longer answer is
// streamed on to the sender from that point (what is held is stored,
// marked truncated), so one webhook never holds more than max_stored_body
// of the site's answer in memory.
type capture struct {
	header http.Header
	status int
	body   bytes.Buffer
	limit  int64
	out    http.ResponseWriter // the sender, once the answer overflows limit
	// overflowed: the answer passed limit; the sender has had the headers
	// and everything since.
	overflowed bool

	mu  sync.Mutex // guards err: set from the proxy's error handler and body reads
	err error      // transport error, or a read error on the site's body

	// keyHeader: keyValue is set on the outgoing request (forward_key_header).
	keyHeader, keyValue string

	// wroteHeaders: http.Transport (https:// sites) wrote the request
	// line and headers (httptrace's WroteHeaders).
	wroteHeaders atomic.Bool
}

// trace records how far the request got, for a RoundTripper that does not
// say it in its errors (http.Transport; oneShot's sendError counts bytes).
func (c *capture) trace() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{WroteHeaders: func() { c.wroteHeaders.Store(true) }}
}

// started reports whether any byte of the request may have reached the
// site before err ended the forward (see requestStarted).
func (c *capture) started(err error) bool { return requestStarted(err, c.wroteHeaders.Load()) }

// requestStarted reports whether any byte of the request may have reached
// the site before err. oneShot (http:// sites) counts the bytes it wrote
// and says so in its sendError. http.Transport (https:// sites) does not
// say it in the error it returns (its nothingWrittenError is unwrapped
// before RoundTrip returns): the request counts as started once the
// transport wrote its headers (to the connection's buffer, after the TLS
// handshake); a failure in between, rare on a fresh connection, errs on
// the ambiguous side, never towards running the handler twice.
func requestStarted(err error, wroteHeaders bool) bool {
	var se *sendError
	if errors.As(err, &se) {
		return se.written > 0
	}
	return wroteHeaders && !isDialError(err)
}

// newCapture holds up to limit bytes of the answer, then streams to w.
func newCapture(w http.ResponseWriter, limit int64) *capture {
	return &capture{header: http.Header{}, limit: limit, out: w}
}

func (c *capture) Header() http.Header { return c.header }

func (c *capture) WriteHeader(code int) {
	if code < 200 { // 1xx informational answers are not the answer
		return
	}
	if c.status == 0 {
		c.status = code
	}
}

// streamed reports whether the answer overflowed limit and went to the
// sender as it came: nothing more is to be written to the sender.
func (c *capture) streamed() bool { return c.overflowed }

func (c *capture) Write(p []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	if c.overflowed {
		return c.out.Write(p)
	}
	if room := c.limit - int64(c.body.Len()); int64(len(p)) <= room {
		return c.body.Write(p)
	}
	// Over the limit: the sender gets the site's headers, what is held
	// and the rest as it comes; only the held part is kept.
	c.overflowed = true
	h := c.out.Header()
	for k, vs := range c.header {
		h[k] = vs
	}
	c.out.WriteHeader(c.status)
	if _, err := c.out.Write(c.body.Bytes()); err != nil {
		return 0, err
	}
	c.body.Write(p[:c.limit-int64(c.body.Len())])
	return c.out.Write(p)
}

func (c *capture) setErr(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = err
	}
}

func (c *capture) failure() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

type captureKey struct{}

// bodyWatch records a read error of the site's response body into the
// capture: ReverseProxy would otherwise only log it and leave a short body
// that looks complete.
type bodyWatch struct {
	io.ReadCloser
	c *capture
}

func (b bodyWatch) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		b.c.setErr(err)
	}
	return n, err
}

// outcome classifies how a forward ended.
type outcome int

const (
	answered      outcome = iota // the site answered; see capture.status
	unreachable                  // no byte of the request reached the site (a dial failure, a failure before the first byte)
	timedOut                     // upstream_timeout passed after the request started: the site may have run
	broken                       // the connection broke after the request started, and no answer could be read
	aborted                      // hookonce is shutting down; the request never reached the site
	abortedAtSite                // hookonce is shutting down; the site had the request
)

// classify says how a forward ended; started tells whether any byte of
// the request may have reached the site (requestStarted). A started
// request is never unreachable: the site may have read enough to run the
// handler, so with no answer the outcome is ambiguous (row 10a). (An
// answer read after a failed write is an answer: err is nil.)
func classify(ctx context.Context, abortCtx context.Context, err error, started bool) outcome {
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

// newTransport is tuned for one upstream on the same host: many idle
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
func newReverseProxies(upstream *url.URL, t http.RoundTripper, keepIdle time.Duration, client func(r *http.Request) (addr string, trusted bool), onPassError func(*http.Request, error)) (pass, capt *httputil.ReverseProxy) {
	rewrite := func(pr *httputil.ProxyRequest) {
		pr.SetURL(upstream)
		// ReverseProxy re-encodes a query that net/url cannot parse (a
		// stray "%", ";"), dropping and reordering fields: the site would
		// read another query than the one judged. Send it as it came.
		switch {
		case upstream.RawQuery == "":
			pr.Out.URL.RawQuery = pr.In.URL.RawQuery
		case pr.In.URL.RawQuery != "":
			pr.Out.URL.RawQuery = upstream.RawQuery + "&" + pr.In.URL.RawQuery
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
		if upstream.Scheme == "http" {
			ct = newOneShot(keepIdle)
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
