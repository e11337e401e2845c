package proxy

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hookonce/hookonce/proxy/internal/oneshot"
)

// capture is the site's answer to a claimed forward (siteCall), held so
// it can be judged and stored before the sender sees it. At most limit
// bytes are held: a longer answer is streamed on to the sender from that
// point (what is held is stored, marked truncated), so one webhook never
// holds more than max_stored_body of the site's answer in memory.
type capture struct {
	header http.Header
	status int
	body   bytes.Buffer
	limit  int64
	out    http.ResponseWriter // the sender, once the answer overflows limit
	// overflowed: the answer passed limit; the sender has had the headers
	// and everything since.
	overflowed bool
	// answered: the RoundTripper returned an answer (a status line was
	// read), whatever came of it.
	answered bool

	mu  sync.Mutex // guards err: set from the RoundTripper's result and body reads
	err error      // transport error, or a read error on the site's body

	// wroteHeaders: http.Transport (https:// sites) wrote the request
	// line and headers (httptrace's WroteHeaders).
	wroteHeaders atomic.Bool
}

// trace records how far the request got, for a RoundTripper that does not
// say it in its errors (http.Transport; oneshot.SendError counts bytes).
// Got1xxResponse is set as ReverseProxy set it: http.Transport then
// bounds each informational answer's headers on their own, not all of
// them with the final answer's; the answers themselves are not the answer
// and are dropped.
func (c *capture) trace() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		WroteHeaders:   func() { c.wroteHeaders.Store(true) },
		Got1xxResponse: func(int, textproto.MIMEHeader) error { return nil },
	}
}

// started reports whether any byte of the request may have reached the
// site before err ended the forward (see requestStarted). A site that sent
// a status has the request: an error while its body was being read (a
// timeout mid-answer, a reset) is never "unreachable", whatever the
// RoundTripper says of its own write.
func (c *capture) started(err error) bool {
	return c.status != 0 || c.answered || requestStarted(err, c.wroteHeaders.Load())
}

// requestStarted reports whether any byte of the request may have reached
// the site before err. oneShot (http:// sites) counts the bytes it wrote
// and says so in its oneshot.SendError. http.Transport (https:// sites) does not
// say it in the error it returns (its nothingWrittenError is unwrapped
// before RoundTrip returns): the request counts as started once the
// transport wrote its headers (to the connection's buffer, after the TLS
// handshake); a failure in between, rare on a fresh connection, errs on
// the ambiguous side, never towards running the handler twice.
func requestStarted(err error, wroteHeaders bool) bool {
	var se *oneshot.SendError
	if errors.As(err, &se) {
		return se.Written > 0
	}
	return wroteHeaders && !isDialError(err)
}

// newCapture holds up to limit bytes of the answer, then streams to w.
func newCapture(w http.ResponseWriter, limit int64) *capture {
	return &capture{limit: limit, out: w}
}

// read takes the site's answer: its status, its headers but the
// hop-by-hop ones, its body (held up to limit, streamed on past it), and
// its trailers, which join the headers once the body was read (announced
// in a Trailer header, as ReverseProxy passed them). A body that fails to
// read sets c's error; the sender hanging up while a long answer streams
// on ends the copy, and what was held is kept.
func (c *capture) read(res *http.Response) {
	c.answered = true
	if res.StatusCode == http.StatusSwitchingProtocols {
		res.Body.Close()
		c.setErr(errSwitched)
		return
	}
	stripHopByHop(res.Header)
	c.header = res.Header // the answer's own map: nothing else reads it
	if c.header == nil {
		c.header = http.Header{}
	}
	announced := len(res.Trailer)
	if announced > 0 {
		keys := make([]string, 0, announced)
		for k := range res.Trailer {
			keys = append(keys, k)
		}
		c.header.Add("Trailer", strings.Join(keys, ", "))
	}
	c.WriteHeader(res.StatusCode)
	if !c.copyBody(res.Body) {
		res.Body.Close()
		return
	}
	res.Body.Close() // now, so that res.Trailer is filled in
	prefix := ""
	if len(res.Trailer) != announced {
		prefix = http.TrailerPrefix // some came unannounced
	}
	for k, vs := range res.Trailer {
		for _, v := range vs {
			c.header.Add(prefix+k, v)
		}
	}
}

// copyBody reads the answer's body into c until its end; false: it ended
// early, on a read error (c's error) or a failed write to the sender.
func (c *capture) copyBody(body io.Reader) bool {
	buf := copyBuffers.Get()
	defer copyBuffers.Put(buf)
	for {
		n, rerr := body.Read(buf)
		if rerr != nil && rerr != io.EOF {
			c.setErr(rerr)
		}
		if n > 0 {
			if w, werr := c.Write(buf[:n]); werr != nil || w != n {
				return false
			}
		}
		if rerr != nil {
			return rerr == io.EOF
		}
	}
}

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
