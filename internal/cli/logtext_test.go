package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// textTricky are strings slog.TextHandler writes as they are or quotes:
// empty, spaces of every kind, '=', quotes, backslashes, control
// characters, DEL, invalid UTF-8, unprintable and wide runes.
var textTricky = []string{
	"", " ", "a b", "a=b", "=", `"`, `a"b`, `\`, `a\b`, "\x00", "\t", "\n", "a\rb", "\x1f", "\x7f", "\x80", "\xff\xfe",
	"\b\f\v", "<a href='x'>&amp;</a>", "\u2029", "a\u2028b", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe2\x80",
	"ok", "duplicate", "/hooks/shop", "evt_1042", "ключ", "日本", "\u00a0", "\u2028", "\u200b", "\ufeff", "\U0001F600",
	"a\u0300", "\u0085", "x\xc3", "c:\\dir", "{\"a\":1}", "k=v k2=v2", "[]", "!BADKEY", "-", "+", "1e9", "null",
}

// slogs writes one line through slog.TextHandler and through textHandler
// with the same calls, and fails on the first byte they differ in.
func compareText(t *testing.T, opts *slog.HandlerOptions, build func(*slog.Logger) *slog.Logger, log func(*slog.Logger)) {
	t.Helper()
	var want, got bytes.Buffer
	slogs, ours := slog.Handler(slog.NewTextHandler(&want, opts)), newTextHandler(&got, opts)
	if jsonLines {
		slogs, ours = slog.NewJSONHandler(&want, opts), newJSONHandler(&got, opts)
	}
	log(build(slog.New(atTime{slogs})))
	log(build(slog.New(atTime{ours})))
	if got.String() != want.String() {
		t.Fatalf("textHandler (json %v) wrote\n%q\nslog's handler wrote\n%q", jsonLines, got.String(), want.String())
	}
}

// jsonLines: compareText compares JSON lines (TestJSONHandlerIsSlogs).
var jsonLines bool

// atTime gives every record without a chosen time (a Logger's call) one
// fixed time, so that two lines written one after the other can agree.
type atTime struct{ slog.Handler }

var lineTime = time.Date(2026, 12, 3, 18, 39, 15, 987_654_321, time.UTC)

func (a atTime) Handle(ctx context.Context, r slog.Record) error {
	if r.PC != 1 {
		r.Time = lineTime
	}
	return a.Handler.Handle(ctx, r)
}
func (a atTime) WithAttrs(as []slog.Attr) slog.Handler { return atTime{a.Handler.WithAttrs(as)} }
func (a atTime) WithGroup(name string) slog.Handler    { return atTime{a.Handler.WithGroup(name)} }

func TestTextHandlerIsSlogs(t *testing.T) { handlerIsSlogs(t) }

// The same comparisons for --log-format json against slog.JSONHandler.
func TestJSONHandlerIsSlogs(t *testing.T) {
	jsonLines = true
	defer func() { jsonLines = false }()
	handlerIsSlogs(t)
}

func handlerIsSlogs(t *testing.T) {
	same := func(l *slog.Logger) *slog.Logger { return l }
	at := time.Date(2026, 12, 3, 18, 39, 15, 123_456_789, time.UTC)
	// Every tricky string as a key, a value, the message and a With
	// attribute, in the delivery line's shape.
	for _, s := range textTricky {
		for _, opts := range []*slog.HandlerOptions{nil, {Level: slog.LevelInfo}, {Level: slog.LevelWarn}} {
			compareText(t, opts, func(l *slog.Logger) *slog.Logger { return l.With("sender", s) }, func(l *slog.Logger) {
				l.LogAttrs(context.Background(), slog.LevelInfo, "webhook", slog.String("key", s), slog.String("outcome", "duplicate"),
					slog.Int("status", 200), slog.Int64("duration_ms", 0), slog.Bool("site_failed", true))
				l.LogAttrs(context.Background(), slog.LevelWarn, s, slog.String(s, s), slog.Int64(s, math.MinInt64))
				l.Info(s, s, s, "n", math.MaxInt64, "b", false)
				l.Error("webhook", "err", s)
			})
		}
	}
	// Values of other kinds and groups take slog's own path, and With
	// attributes of any kind keep it.
	err := errors.New("dial tcp: connection refused")
	type named string
	compareText(t, nil, same, func(l *slog.Logger) {
		l.Warn("webhook", "err", err, "d", 1500*time.Millisecond, "f", 1.5, "u", uint64(7), "t", at, "named", named("x y"), "nil", nil,
			"bytes", []byte("a b"), "any", struct{ A int }{1})
		l.Info("with group", slog.Group("g", "a", 1, "b", "c d"), "k", "v")
		l.Info("empty group", slog.Group("g"), "k", "v")
		odd := []any{"odd"}
		l.Info("!BADKEY", odd...)
		l.LogAttrs(context.Background(), slog.LevelInfo, "empty key", slog.String("", ""), slog.Int("", 0))
	})
	compareText(t, nil, func(l *slog.Logger) *slog.Logger { return l.With("a", 1).WithGroup("g").With("b", "c") }, func(l *slog.Logger) {
		l.Info("grouped", "k", "v", "e", err)
	})
	compareText(t, nil, func(l *slog.Logger) *slog.Logger { return l.With("err", err).With("by", "durable") }, func(l *slog.Logger) {
		l.Info("webhook", "k", "v")
	})
	compareText(t, nil, func(l *slog.Logger) *slog.Logger { return l.WithGroup("").With(slog.Group("empty")).With("a", "b") }, func(l *slog.Logger) {
		l.Info("webhook", "k", "v")
	})
	compareText(t, nil, func(l *slog.Logger) *slog.Logger { return l.With("sender", "shop").With("by", "durable") }, func(l *slog.Logger) {
		l.Info("webhook", "k", "v")
		l.Info("no attrs")
	})
	// Levels between and beyond the named ones, and a level filter.
	compareText(t, &slog.HandlerOptions{Level: slog.LevelDebug}, same, func(l *slog.Logger) {
		for _, lv := range []slog.Level{slog.LevelDebug - 4, slog.LevelDebug, slog.LevelInfo + 1, slog.LevelWarn + 2, slog.LevelError, slog.LevelError + 8} {
			l.Log(context.Background(), lv, "level", "k", "v")
		}
	})
	// Times: every millisecond digit, zones other than UTC, the second
	// changing, years the cache does not take, a zero time (no time=).
	zones := []*time.Location{time.UTC, time.FixedZone("MSK", 3*3600), time.FixedZone("NPT", 5*3600+45*60), time.FixedZone("W", -(9*3600 + 30*60)), time.Local}
	times := []time.Time{at, at.Add(877 * time.Millisecond), at.Truncate(time.Second), at.Truncate(time.Second).Add(-time.Nanosecond),
		at.Truncate(time.Millisecond), at.Truncate(time.Microsecond), at.Truncate(10 * time.Millisecond), at.Truncate(time.Second).Add(time.Nanosecond),
		at.Truncate(time.Second).Add(100 * time.Millisecond), at.Truncate(time.Second).Add(999 * time.Millisecond),
		time.Date(999, 1, 1, 0, 0, 0, 5e6, time.UTC), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC), {}}
	rng := rand.New(rand.NewPCG(47, 3))
	for range 2000 {
		times = append(times, at.Add(time.Duration(rng.Int64N(int64(48*time.Hour)))))
	}
	for _, tm := range times {
		for _, z := range zones { // one second in every zone in a row: the cache must tell them apart
			if !tm.IsZero() {
				tm = tm.In(z)
			}
			compareText(t, nil, same, func(l *slog.Logger) {
				r := slog.NewRecord(tm, slog.LevelInfo, "webhook", 1) // PC 1: atTime keeps tm
				r.AddAttrs(slog.String("key", "k"))
				_ = l.Handler().Handle(context.Background(), r)
			})
		}
	}
	// Random strings of tricky bytes and runes.
	pieces := append([]string{"a", "Z", "0", "_", "-", ".", "/", ":"}, textTricky...)
	for range 3000 {
		var sb strings.Builder
		for range rng.IntN(6) {
			sb.WriteString(pieces[rng.IntN(len(pieces))])
		}
		s, n, b := sb.String(), rng.Int64()-math.MaxInt64/2, rng.IntN(2) == 0
		compareText(t, nil, func(l *slog.Logger) *slog.Logger { return l.With(s, s) }, func(l *slog.Logger) {
			l.Info(s, s, s, "n", n, "b", b)
		})
	}
}

// Lines from goroutines sharing one textHandler (and the handlers With
// derives from it) never interleave, whichever path writes them.
func TestTextHandlerLinesWhole(t *testing.T) {
	var out bytes.Buffer
	l := slog.New(newTextHandler(&out, nil))
	done := make(chan struct{})
	for g := range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			lg := l.With("g", g)
			for i := range 200 {
				if i%2 == 0 {
					lg.Info("webhook", "key", strings.Repeat("k", 100), "i", i)
				} else {
					lg.Info("webhook", "err", errors.New(strings.Repeat("e", 100)), "i", i)
				}
			}
		}()
	}
	for range 8 {
		<-done
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 1600 {
		t.Fatalf("%d lines, want 1600", len(lines))
	}
	for _, line := range lines {
		if !strings.HasPrefix(line, "time=") || strings.Count(line, "time=") != 1 {
			t.Fatalf("interleaved line: %q", line)
		}
	}
}

// The delivery line (a duplicate's) through slog's handlers and through
// textHandler, text and JSON, to io.Discard:
//
//	go test ./internal/cli -run '^$' -bench TextHandler -benchmem
func BenchmarkTextHandler(b *testing.B) {
	for _, tc := range []struct {
		name string
		h    slog.Handler
	}{
		{"text/slog", slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo})},
		{"text/textHandler", newTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo})},
		{"json/slog", slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo})},
		{"json/textHandler", newJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo})},
	} {
		b.Run(tc.name, func(b *testing.B) {
			h := tc.h.WithAttrs([]slog.Attr{slog.String("sender", "shop")})
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				r := slog.NewRecord(time.Now(), slog.LevelInfo, "webhook", 0)
				r.AddAttrs(slog.String("key", "evt_1042"), slog.String("outcome", "duplicate"), slog.Int("status", 200), slog.Int64("duration_ms", 0))
				_ = h.Handle(ctx, r)
			}
		})
	}
}
