package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"time"
)

// oneShot is the RoundTripper of webhook forwards to an http:// site: each
// request goes out on a connection of its own, dialled for it, written
// once, and closed with its answer. There is no pool to pick a dying
// connection from and no transport logic that could send a request twice
// (trap 1); whether the request was written is known exactly (the write
// returned), and reported to the httptrace WroteRequest hook as
// http.Transport does. It costs less than a Transport with keep-alives
// off, which runs three goroutines and a dial goroutine per connection.
type oneShot struct {
	dialer *net.Dialer
	// maxHeader bounds the site's answer's header block, as
	// http.Transport's MaxResponseHeaderBytes does.
	maxHeader int64
}

// oneShotMaxHeader is http.Transport's default MaxResponseHeaderBytes.
const oneShotMaxHeader = 10 << 20

var (
	oneShotReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4<<10) }}
	oneShotWriters = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 4<<10) }}
)

func (o *oneShot) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	closeBody := func() {
		if req.Body != nil {
			req.Body.Close()
		}
	}
	if req.URL.Scheme != "http" {
		closeBody()
		return nil, fmt.Errorf("oneShot: unsupported scheme %q", req.URL.Scheme)
	}
	addr := req.URL.Host
	if req.URL.Port() == "" {
		addr = net.JoinHostPort(req.URL.Hostname(), "80")
	}
	conn, err := o.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		closeBody()
		return nil, err
	}
	// The forward's deadline or hookonce's shutdown interrupts whatever
	// the connection is doing.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	fail := func(err error) (*http.Response, error) {
		stop()
		conn.Close()
		if cerr := context.Cause(ctx); cerr != nil && ctx.Err() != nil {
			return nil, fmt.Errorf("%w (%w)", cerr, err)
		}
		return nil, err
	}

	req.Close = true // Connection: close: the site ends the connection with its answer
	bw := oneShotWriters.Get().(*bufio.Writer)
	bw.Reset(conn)
	err = req.Write(bw) // closes req.Body
	if err == nil {
		err = bw.Flush()
	}
	bw.Reset(nil)
	oneShotWriters.Put(bw)
	if trace := httptrace.ContextClientTrace(ctx); trace != nil && trace.WroteRequest != nil {
		trace.WroteRequest(httptrace.WroteRequestInfo{Err: err})
	}
	if err != nil {
		return fail(err)
	}

	lr := &limitedConn{Conn: conn, left: o.maxHeader}
	br := oneShotReaders.Get().(*bufio.Reader)
	br.Reset(lr)
	var resp *http.Response
	for {
		resp, err = http.ReadResponse(br, req)
		if err != nil {
			br.Reset(nil)
			oneShotReaders.Put(br)
			if errors.Is(err, errHeaderTooLong) {
				err = fmt.Errorf("the site's answer has more than %d bytes of headers", o.maxHeader)
			}
			return fail(err)
		}
		// Informational answers (103 Early Hints, a stray 100) are not
		// the answer; 101 would be, but no webhook upgrades.
		if resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			continue
		}
		break
	}
	lr.left = -1 // the body is bounded by whoever reads it
	resp.Body = &oneShotBody{ReadCloser: resp.Body, conn: conn, br: br, stop: stop}
	return resp, nil
}

var errHeaderTooLong = errors.New("header too long")

// limitedConn fails reads once left bytes were read (left < 0: no limit).
type limitedConn struct {
	net.Conn
	left int64
}

func (l *limitedConn) Read(p []byte) (int, error) {
	if l.left < 0 {
		return l.Conn.Read(p)
	}
	if l.left == 0 {
		return 0, errHeaderTooLong
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.Conn.Read(p)
	l.left -= int64(n)
	return n, err
}

// oneShotBody is the site's answer's body; closing it ends the connection.
type oneShotBody struct {
	io.ReadCloser
	conn net.Conn
	br   *bufio.Reader
	stop func() bool
	once sync.Once
}

func (b *oneShotBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(func() {
		b.stop()
		b.conn.Close()
		b.br.Reset(nil)
		oneShotReaders.Put(b.br)
	})
	return err
}
