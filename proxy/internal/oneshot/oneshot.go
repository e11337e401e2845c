// Package oneshot is the RoundTripper of hookonce's capturing forwards to an
// http:// site: each request written once, on one connection, never sent
// again (see Transport).
package oneshot

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"sync"
	"time"
)

// Transport is the RoundTripper of webhook forwards to an http:// site: each
// request is written once, on one connection, and never sent again. There
// is no transport logic that could send a request twice (trap 1); how many
// bytes of the request reached the connection is counted exactly and
// carried by every error after the connection was had (SendError), and
// the outcome of the write is reported to the httptrace WroteRequest hook
// as http.Transport does. It costs less than a Transport with keep-alives
// off, which runs three goroutines and a dial goroutine per connection.
//
// With keepIdle 0 every request dials a connection of its own and says
// Connection: close. With keepIdle > 0 a connection whose last answer left
// it provably reusable goes back to a small idle list and the next request
// may take it, only if it waited there less than keepIdle and the socket
// is quiet right before the write: no byte and no end of stream waiting
// (trap 32). A site closing an idle connection sends its FIN when it
// closes, so a connection it closed before that look is never written to;
// keepIdle is kept far below every common server's idle timeout (Apache's
// and Node's 5 s, nginx's 75 s), so the site has no reason to close it in
// the microseconds between the look and the write, short of a restart.
// Under load, where the dial's cost shows, connections come back within
// milliseconds; a quiet site dials as before.
//
// A site may answer before it has read the whole request and close the
// connection (Go's server past 256 KB unread, a framework keyed on a
// header): the write fails, yet the answer is on the socket. Once any byte
// was written, a failed write is followed by one attempt to read the
// answer, for at most earlyAnswerGrace and never past the forward's
// deadline (trap 31).
type Transport struct {
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// maxHeader bounds the site's answer's header block, as
	// http.Transport's MaxResponseHeaderBytes does.
	maxHeader int64
	// grace bounds the wait for an answer after a failed write; 0 means
	// earlyAnswerGrace.
	grace time.Duration
	// keepIdle is how long a connection may wait in idle for its next
	// request; 0: none is kept.
	keepIdle time.Duration

	mu    sync.Mutex
	idle  []idleConn  // most recently returned last
	sweep *time.Timer // closes what waited keepIdle, while any waits
	shut  bool        // CloseIdle was called: keep nothing more
}

// idleConn is a connection waiting for its next request, since when.
type idleConn struct {
	nc    net.Conn
	since time.Time
}

// maxIdleConns bounds the connections kept idle; more are closed.
const maxIdleConns = 64

// oneShotMaxHeader is http.Transport's default MaxResponseHeaderBytes.
const oneShotMaxHeader = 10 << 20

// earlyAnswerGrace is how long an answer is waited for once writing the
// request failed: a site that answered early and closed has its answer in
// flight already.
const earlyAnswerGrace = time.Second

// New returns a Transport that dials with dial and keeps a connection idle
// for keepIdle at most (0: none is kept).
func New(dial func(ctx context.Context, network, addr string) (net.Conn, error), keepIdle time.Duration) *Transport {
	return &Transport{dial: dial, maxHeader: oneShotMaxHeader, keepIdle: keepIdle}
}

// FreshConn asks the Transport, for requests made with the returned
// context, for a connection of their own even when it keeps idle ones.
func FreshConn(ctx context.Context) context.Context {
	return context.WithValue(ctx, freshConnKey{}, true)
}

// A WriteCheck is asked, right before a request is written, whether it
// may be (BeforeWrite).
type WriteCheck interface{ BeforeWrite() error }

// CheckFunc is a function as a WriteCheck.
type CheckFunc func() error

// BeforeWrite calls f.
func (f CheckFunc) BeforeWrite() error { return f() }

// BeforeWrite has the Transport call check, for requests made with the
// returned context, right before it writes the request: an error stops
// the forward with nothing written (a delivery whose claim's lease ran
// out). The error is returned as is. An interface rather than a func so
// that a caller's own pointer type can be the check without a closure.
func BeforeWrite(ctx context.Context, check WriteCheck) context.Context {
	return context.WithValue(ctx, beforeWriteKey{}, check)
}

// freshConnKey in a request's context asks Transport for a connection of its
// own even when it keeps idle ones.
type freshConnKey struct{}

// beforeWriteKey in a request's context holds a WriteCheck that Transport
// calls right before it writes the request: an error stops the forward
// with nothing written (a delivery whose claim's lease ran out).
type beforeWriteKey struct{}

// take returns the most recently returned idle connection that may carry
// another request now, closing the ones that may not.
func (o *Transport) take() net.Conn {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := time.Now()
	for n := len(o.idle); n > 0; n = len(o.idle) {
		ic := o.idle[n-1]
		o.idle[n-1] = idleConn{}
		o.idle = o.idle[:n-1]
		if now.Sub(ic.since) >= o.keepIdle {
			// Every connection below waited longer still.
			ic.nc.Close()
			for _, old := range o.idle {
				old.nc.Close()
			}
			clear(o.idle)
			o.idle = o.idle[:0]
			return nil
		}
		if quiet(ic.nc) {
			return ic.nc
		}
		ic.nc.Close() // the site closed it, or sent what no request asked for
	}
	return nil
}

// put keeps nc for the next request, or closes it when the list is full.
func (o *Transport) put(nc net.Conn) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.shut || len(o.idle) >= maxIdleConns {
		nc.Close()
		return
	}
	o.idle = append(o.idle, idleConn{nc: nc, since: time.Now()})
	if o.sweep == nil {
		o.sweep = time.AfterFunc(o.keepIdle, o.expire)
	}
}

// expire closes the connections that waited keepIdle or longer, so that
// none outlives it in CLOSE_WAIT once webhooks stop coming, and runs again
// while any are left.
func (o *Transport) expire() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.sweep = nil
	if o.shut {
		return
	}
	now := time.Now()
	n := 0 // the oldest are first
	for n < len(o.idle) && now.Sub(o.idle[n].since) >= o.keepIdle {
		o.idle[n].nc.Close()
		n++
	}
	left := copy(o.idle, o.idle[n:])
	clear(o.idle[left:])
	o.idle = o.idle[:left]
	if left > 0 {
		o.sweep = time.AfterFunc(o.keepIdle-now.Sub(o.idle[0].since), o.expire)
	}
}

// CloseIdle closes the idle connections and keeps none from now on.
func (o *Transport) CloseIdle() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.shut = true
	if o.sweep != nil {
		o.sweep.Stop()
		o.sweep = nil
	}
	for _, ic := range o.idle {
		ic.nc.Close()
	}
	o.idle = nil
}

var (
	oneShotReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4<<10) }}
	oneShotWriters = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 4<<10) }}
)

// SendError is Transport's error once the connection was dialled: written
// bytes of the request had reached the connection when err ended the
// forward. written 0 means the site cannot have seen the request.
// kept: the connection was kept from an earlier forward (trap 32), which
// the log says, so that an operator can lay such failures next to the
// site's restarts.
type SendError struct {
	Written int64
	Err     error
	Kept    bool
}

func (e *SendError) Error() string {
	on := ""
	if e.Kept {
		on = ", on a connection kept from an earlier forward"
	}
	if e.Written == 0 {
		return e.Err.Error() + " (nothing of the request was written" + on + ")"
	}
	return fmt.Sprintf("%v (after %d bytes of the request were written%s)", e.Err, e.Written, on)
}

func (e *SendError) Unwrap() error { return e.Err }

func (o *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	closeBody := func() {
		if req.Body != nil {
			req.Body.Close()
		}
	}
	if req.URL.Scheme != "http" {
		closeBody()
		return nil, fmt.Errorf("Transport: unsupported scheme %q", req.URL.Scheme)
	}
	addr := req.URL.Host
	if req.URL.Port() == "" {
		addr = net.JoinHostPort(req.URL.Hostname(), "80")
	}
	keep := o.keepIdle > 0 && ctx.Value(freshConnKey{}) == nil
	var nc net.Conn
	if keep {
		nc = o.take()
	}
	kept := nc != nil
	if nc == nil {
		var err error
		if nc, err = o.dial(ctx, "tcp", addr); err != nil {
			closeBody()
			return nil, err
		}
	}
	// conn counts what is written and bounds what is read of the headers.
	conn := &oneShotConn{Conn: nc, left: o.maxHeader}
	// The forward's deadline or hookonce's shutdown interrupts whatever
	// the connection is doing.
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Unix(1, 0)) })
	fail := func(err error) (*http.Response, error) {
		stop()
		nc.Close()
		if cerr := context.Cause(ctx); cerr != nil && ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", cerr, err)
		}
		return nil, &SendError{Written: conn.written, Kept: kept, Err: err}
	}

	// The last moment before a byte reaches the site: the delivery checks
	// that its claim is still its own (beforeWriteKey).
	if check, _ := ctx.Value(beforeWriteKey{}).(WriteCheck); check != nil {
		if err := check.BeforeWrite(); err != nil {
			closeBody()
			return fail(err)
		}
	}
	// Connection: close: the site ends the connection with its answer.
	req.Close = !keep
	bw := oneShotWriters.Get().(*bufio.Writer)
	bw.Reset(conn)
	handled, err := writeRequest(bw, req) // a forward's shape, without Request.Write's formatting
	if !handled {
		err = req.Write(oneWrite{bw}) // closes req.Body
	}
	if err == nil {
		err = bw.Flush()
	}
	if err != nil && conn.werr != nil {
		// The connection's own error: Request.Write hides a failed body
		// write behind a wrapper that does not unwrap.
		err = conn.werr
	}
	bw.Reset(nil)
	oneShotWriters.Put(bw)
	if trace := httptrace.ContextClientTrace(ctx); trace != nil && trace.WroteRequest != nil {
		trace.WroteRequest(httptrace.WroteRequestInfo{Err: err})
	}
	if err != nil {
		if conn.written == 0 {
			return fail(err) // the site cannot have seen it
		}
		// The site may have answered and closed without reading the
		// rest: read what it said, briefly. The deadline is set before
		// ctx is checked, so a deadline set by stop's AfterFunc is never
		// overwritten unnoticed.
		werr := err
		grace := o.grace
		if grace <= 0 {
			grace = earlyAnswerGrace
		}
		until := time.Now().Add(grace)
		dl, atDeadline := ctx.Deadline()
		if atDeadline = atDeadline && dl.Before(until); atDeadline {
			until = dl
		}
		_ = nc.SetReadDeadline(until)
		if ctx.Err() != nil {
			return fail(werr)
		}
		resp, rerr := o.readResponse(conn, req)
		if rerr != nil {
			err = fmt.Errorf("%w; no answer could be read: %w", werr, rerr)
			if atDeadline && isTimeout(rerr) && ctx.Err() == nil {
				// The read ended at the forward's deadline a moment
				// before the context's own timer: say so.
				err = fmt.Errorf("%w (%w)", context.DeadlineExceeded, err)
			}
			return fail(err)
		}
		return o.answer(resp, conn, stop, false), nil
	}
	resp, err := o.readResponse(conn, req)
	if err != nil {
		return fail(err)
	}
	return o.answer(resp, conn, stop, keep), nil
}

// oneWrite hides the *bufio.Writer from Request.Write, which otherwise
// flushes the headers on their own before any body it does not know to be
// in memory, and ReverseProxy wraps every body: two write calls and two
// packets for a request that is whole in memory. RoundTrip flushes once
// (a body past the buffer still goes out as the buffer fills).
type oneWrite struct{ *bufio.Writer }

// oneShotAnswer is an answer read with the pooled reader it came through.
type oneShotAnswer struct {
	*http.Response
	br *bufio.Reader
}

// readResponse reads the site's final answer's header block.
func (o *Transport) readResponse(conn *oneShotConn, req *http.Request) (oneShotAnswer, error) {
	br := oneShotReaders.Get().(*bufio.Reader)
	br.Reset(conn)
	for {
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			br.Reset(nil)
			oneShotReaders.Put(br)
			if errors.Is(err, errHeaderTooLong) {
				err = fmt.Errorf("the site's answer has more than %d bytes of headers", o.maxHeader)
			}
			return oneShotAnswer{}, err
		}
		// Informational answers (103 Early Hints, a stray 100) are not
		// the answer; 101 would be, but no webhook upgrades.
		if resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			continue
		}
		return oneShotAnswer{Response: resp, br: br}, nil
	}
}

// answer hands the answer on; closing its body ends the connection, or,
// when keep and the answer left the connection reusable, puts it back.
// An answer leaves it reusable when it was HTTP/1.1 without Connection:
// close and its body had a length or was chunked (resp.Close covers an
// answer read to the end of the connection), its body was read to the
// end, nothing followed it, and the forward's deadline did not fire.
func (o *Transport) answer(a oneShotAnswer, conn *oneShotConn, stop func() bool, keep bool) *http.Response {
	conn.left = -1 // the body is bounded by whoever reads it
	keep = keep && !a.Close && a.ProtoAtLeast(1, 1)
	a.Body = &oneShotBody{ReadCloser: a.Body, conn: conn.Conn, br: a.br, stop: stop, o: o, keep: keep}
	return a.Response
}

var errHeaderTooLong = errors.New("header too long")

// oneShotConn counts the bytes written to the site and fails reads once
// left bytes were read (left < 0: no limit).
type oneShotConn struct {
	net.Conn
	written int64
	werr    error // the first write error
	left    int64
}

func (c *oneShotConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.written += int64(n)
	if err != nil && c.werr == nil {
		c.werr = err
	}
	return n, err
}

func (c *oneShotConn) Read(p []byte) (int, error) {
	if c.left < 0 {
		return c.Conn.Read(p)
	}
	if c.left == 0 {
		return 0, errHeaderTooLong
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.Conn.Read(p)
	c.left -= int64(n)
	return n, err
}

// oneShotBody is the site's answer's body; closing it ends the connection
// or, when the answer left it reusable, keeps it for the next request.
type oneShotBody struct {
	io.ReadCloser
	conn net.Conn
	br   *bufio.Reader
	stop func() bool
	o    *Transport
	keep bool // the connection may be kept, once the body was read to its end
	eof  bool // Read answered io.EOF: the whole body was read
	once sync.Once
}

func (b *oneShotBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

func (b *oneShotBody) Close() error {
	// Closing the body reads what is left of it (the site may still be
	// writing; cutting it off could abort a handler that is not done).
	err := b.ReadCloser.Close()
	b.once.Do(func() {
		reuse := b.keep && b.eof && err == nil && b.br.Buffered() == 0
		// stop is false when the forward's deadline or a shutdown already
		// set the connection's deadline in the past.
		if b.stop() && reuse && b.conn.SetDeadline(time.Time{}) == nil {
			b.o.put(b.conn)
		} else {
			b.conn.Close()
		}
		b.br.Reset(nil)
		oneShotReaders.Put(b.br)
	})
	return err
}

// isTimeout reports whether err is a deadline's.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}
