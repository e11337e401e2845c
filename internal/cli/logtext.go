package cli

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"
)

// textHandler writes exactly what slog.TextHandler writes (without
// ReplaceAttr or AddSource, as newLogger makes it), byte for byte, with
// less work for the lines every delivery logs: attributes that are
// strings, integers or booleans outside any group are formatted here, and
// the time's text up to the second is made once per second. Any other
// line (a value of another kind, a group, a zero time) is handed to the
// slog.TextHandler it wraps, so the two never disagree: the fast path
// covers only what TestTextHandlerIsSlogs compares. Both write whole lines
// through one lock, one Write each.
type textHandler struct {
	slow slog.Handler // slog.TextHandler with the same attributes and groups
	out  *lockedWriter
	// pre is the attributes of WithAttrs, formatted ("k=v k2=v2").
	pre []byte
	// fast: no group was opened and every attribute of WithAttrs was a
	// kind formatted here; otherwise every line goes to slow.
	fast bool
}

// lockedWriter makes the two paths' writes one line at a time.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func newTextHandler(w io.Writer, opts *slog.HandlerOptions) *textHandler {
	out := &lockedWriter{w: w}
	return &textHandler{slow: slog.NewTextHandler(out, opts), out: out, fast: opts == nil || opts.ReplaceAttr == nil && !opts.AddSource}
}

func (h *textHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.slow.Enabled(ctx, l)
}

func (h *textHandler) WithAttrs(as []slog.Attr) slog.Handler {
	h2 := &textHandler{slow: h.slow.WithAttrs(as), out: h.out, fast: h.fast}
	if !h.fast {
		return h2
	}
	pre := append([]byte(nil), h.pre...)
	for _, a := range as {
		if a.Value.Kind() == slog.KindGroup && len(a.Value.Group()) == 0 {
			continue // an empty group: slog leaves it out
		}
		if !plain(a) {
			h2.fast = false
			return h2
		}
		if len(pre) > 0 {
			pre = append(pre, ' ')
		}
		pre = appendPlain(pre, a)
	}
	h2.pre = pre
	return h2
}

func (h *textHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return &textHandler{slow: h.slow.WithGroup(name), out: h.out}
}

// textBufs are the lines' buffers.
var textBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

func (h *textHandler) Handle(ctx context.Context, r slog.Record) error {
	if !h.fast || r.Time.IsZero() {
		return h.slow.Handle(ctx, r)
	}
	simple := true
	r.Attrs(func(a slog.Attr) bool {
		simple = plain(a)
		return simple
	})
	if !simple {
		return h.slow.Handle(ctx, r)
	}
	bp := textBufs.Get().(*[]byte)
	b := append((*bp)[:0], "time="...)
	b = lineTimes.append(b, r.Time)
	b = append(b, " level="...)
	b = appendQuoted(b, r.Level.String())
	b = append(b, " msg="...)
	b = appendQuoted(b, r.Message)
	if len(h.pre) > 0 {
		b = append(b, ' ')
		b = append(b, h.pre...)
	}
	r.Attrs(func(a slog.Attr) bool {
		b = append(b, ' ')
		b = appendPlain(b, a)
		return true
	})
	b = append(b, '\n')
	_, err := h.out.Write(b)
	if cap(b) <= 64<<10 {
		*bp = b
		textBufs.Put(bp)
	}
	return err
}

// plain reports whether a is an attribute the fast path formats: a string,
// an integer or a boolean (slog.Int, slog.Any of an int, …).
func plain(a slog.Attr) bool {
	switch a.Value.Kind() {
	case slog.KindString, slog.KindInt64, slog.KindBool:
		return true
	}
	return false
}

// appendPlain appends key=value as slog.TextHandler does for a plain
// attribute.
func appendPlain(b []byte, a slog.Attr) []byte {
	b = appendQuoted(b, a.Key)
	b = append(b, '=')
	switch a.Value.Kind() {
	case slog.KindString:
		return appendQuoted(b, a.Value.String())
	case slog.KindInt64:
		return strconv.AppendInt(b, a.Value.Int64(), 10)
	default: // slog.KindBool
		return strconv.AppendBool(b, a.Value.Bool())
	}
}

// appendQuoted appends s as slog.TextHandler writes a string: as it is,
// or quoted (strconv.Quote) when it is empty or holds a space, '=', '"',
// a control character, invalid UTF-8 or a rune that is a space or not
// printable.
func appendQuoted(b []byte, s string) []byte {
	if needsQuoting(s) {
		return strconv.AppendQuote(b, s)
	}
	return append(b, s...)
}

// needsQuoting is slog.TextHandler's rule (log/slog/text_handler.go).
func needsQuoting(s string) bool {
	if len(s) == 0 {
		return true
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			// What a JSON string escapes (control characters, '"'; not
			// '\\', and not DEL), and space and '='.
			if c == ' ' || c == '=' || c < 0x20 || c == '"' {
				return true
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return true
		}
		i += size
	}
	return false
}

// lineTimes formats a line's time as slog.TextHandler does (RFC 3339 in
// the time's own zone, milliseconds), the text up to the second and the
// zone made once for each second.
var lineTimes timeText

type timeText struct{ last atomic.Pointer[secondText] }

// secondText is the text of one second's times around their milliseconds.
type secondText struct {
	unix       int64
	loc        *time.Location
	head, zone string // "2006-01-02T15:04:05." and "Z" or "+03:00"
}

func (tt *timeText) append(b []byte, t time.Time) []byte {
	t = t.Round(0)
	if y := t.Year(); y < 1000 || y > 9999 {
		return appendRFC3339Millis(b, t) // not the layout the cache assumes
	}
	s := tt.last.Load()
	if s == nil || s.unix != t.Unix() || s.loc != t.Location() {
		full := string(appendRFC3339Millis(nil, t))
		const head = len("2006-01-02T15:04:05.")
		s = &secondText{unix: t.Unix(), loc: t.Location(), head: full[:head], zone: full[head+3:]}
		tt.last.Store(s)
	}
	ms := t.Nanosecond() / int(time.Millisecond)
	b = append(b, s.head...)
	b = append(b, byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10))
	return append(b, s.zone...)
}

// appendRFC3339Millis is slog's (log/slog/handler.go).
func appendRFC3339Millis(b []byte, t time.Time) []byte {
	const prefixLen = len("2006-01-02T15:04:05.000")
	n := len(b)
	t = t.Truncate(time.Millisecond).Add(time.Millisecond / 10)
	b = t.AppendFormat(b, time.RFC3339Nano)
	b = append(b[:n+prefixLen], b[n+prefixLen+1:]...) // drop the 4th digit
	return b
}
