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

// textHandler writes exactly what slog.TextHandler (or, with json,
// slog.JSONHandler) writes, without ReplaceAttr or AddSource as newLogger
// makes them, byte for byte, with less work for the lines every delivery
// logs: attributes that are strings, integers or booleans outside any
// group are formatted here, and the text time's text up to the second is
// made once per second. Any other line (a value of another kind, a group,
// a zero time or one outside the years 1000-9999) is handed to the slog
// handler it wraps, so the two never disagree: the fast path covers only
// what TestTextHandlerIsSlogs and TestJSONHandlerIsSlogs compare. Both
// write whole lines through one lock, one Write each.
type textHandler struct {
	slow slog.Handler // slog's handler with the same attributes and groups
	out  *lockedWriter
	json bool
	// pre is the attributes of WithAttrs, formatted (k=v k2=v2, or
	// "k":v,"k2":v2).
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

// newJSONHandler is newTextHandler for slog.JSONHandler's lines.
func newJSONHandler(w io.Writer, opts *slog.HandlerOptions) *textHandler {
	out := &lockedWriter{w: w}
	return &textHandler{slow: slog.NewJSONHandler(out, opts), out: out, json: true, fast: opts == nil || opts.ReplaceAttr == nil && !opts.AddSource}
}

func (h *textHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.slow.Enabled(ctx, l)
}

func (h *textHandler) WithAttrs(as []slog.Attr) slog.Handler {
	h2 := &textHandler{slow: h.slow.WithAttrs(as), out: h.out, json: h.json, fast: h.fast}
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
			pre = append(pre, h.sep())
		}
		pre = h.appendPlain(pre, a)
	}
	h2.pre = pre
	return h2
}

func (h *textHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return &textHandler{slow: h.slow.WithGroup(name), out: h.out, json: h.json}
}

// sep is what slog writes between two attributes.
func (h *textHandler) sep() byte {
	if h.json {
		return ','
	}
	return ' '
}

// textBufs are the lines' buffers.
var textBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

func (h *textHandler) Handle(ctx context.Context, r slog.Record) error {
	if y := r.Time.Year(); !h.fast || r.Time.IsZero() || y < 1000 || y > 9999 {
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
	b := (*bp)[:0]
	if h.json {
		b = append(b, `{"time":"`...)
		b = jsonTimes.appendNano(b, r.Time)
		b = append(b, `","level":`...)
		b = appendJSONString(b, r.Level.String())
		b = append(b, `,"msg":`...)
		b = appendJSONString(b, r.Message)
	} else {
		b = append(b, "time="...)
		b = lineTimes.append(b, r.Time)
		b = append(b, " level="...)
		b = appendQuoted(b, r.Level.String())
		b = append(b, " msg="...)
		b = appendQuoted(b, r.Message)
	}
	if len(h.pre) > 0 {
		b = append(b, h.sep())
		b = append(b, h.pre...)
	}
	r.Attrs(func(a slog.Attr) bool {
		b = append(b, h.sep())
		b = h.appendPlain(b, a)
		return true
	})
	if h.json {
		b = append(b, '}')
	}
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

// appendPlain appends key=value (or "key":value) as slog does for a
// plain attribute.
func (h *textHandler) appendPlain(b []byte, a slog.Attr) []byte {
	str := appendQuoted
	if h.json {
		str = appendJSONString
	}
	b = str(b, a.Key)
	if h.json {
		b = append(b, ':')
	} else {
		b = append(b, '=')
	}
	switch a.Value.Kind() {
	case slog.KindString:
		return str(b, a.Value.String())
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

// appendJSONString appends s as slog.JSONHandler writes a string: quoted,
// with '"', '\\' and control characters escaped (\n, \r, \t, else
// \u00XX), invalid UTF-8 as \ufffd, U+2028 and U+2029 escaped; HTML
// characters as they are (log/slog/json_handler.go).
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// lineTimes formats a line's time as slog.TextHandler does (RFC 3339 in
// the time's own zone, milliseconds), jsonTimes as slog.JSONHandler does
// (RFC3339Nano: nanoseconds, trailing zeros dropped): the text up to the
// second and the zone made once for each second.
var lineTimes, jsonTimes timeText

type timeText struct{ last atomic.Pointer[secondText] }

// secondText is the text of one second's times around their fraction.
type secondText struct {
	unix       int64
	loc        *time.Location
	head, zone string // "2006-01-02T15:04:05" and "Z" or "+03:00"
}

// second is the text of t's second, made when the last one was another.
// Handle takes years 1000-9999 only: the layout this assumes.
func (tt *timeText) second(t time.Time) *secondText {
	s := tt.last.Load()
	if s == nil || s.unix != t.Unix() || s.loc != t.Location() {
		full := string(t.Truncate(time.Second).AppendFormat(nil, time.RFC3339)) // no fraction
		const head = len("2006-01-02T15:04:05")
		s = &secondText{unix: t.Unix(), loc: t.Location(), head: full[:head], zone: full[head:]}
		tt.last.Store(s)
	}
	return s
}

// append appends t as slog.TextHandler writes a time (appendRFC3339Millis).
func (tt *timeText) append(b []byte, t time.Time) []byte {
	t = t.Round(0)
	s := tt.second(t)
	ms := t.Nanosecond() / int(time.Millisecond)
	b = append(b, s.head...)
	b = append(b, '.', byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10))
	return append(b, s.zone...)
}

// appendNano appends t as slog.JSONHandler writes a time, unquoted:
// t.AppendFormat(b, time.RFC3339Nano).
func (tt *timeText) appendNano(b []byte, t time.Time) []byte {
	t = t.Round(0)
	s := tt.second(t)
	b = append(b, s.head...)
	if ns := t.Nanosecond(); ns != 0 {
		var frac [10]byte
		frac[0] = '.'
		for i := 9; i >= 1; i-- {
			frac[i] = byte('0' + ns%10)
			ns /= 10
		}
		n := 10
		for frac[n-1] == '0' {
			n--
		}
		b = append(b, frac[:n]...)
	}
	return append(b, s.zone...)
}
