package admin

import (
	"errors"
	"html"
	"html/template"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/hookonce/hookonce/dedupe/readiness"
	"github.com/hookonce/hookonce/internal/problem"
)

// The readiness page (/ui/readiness) and its JSON (GET /v1/readiness):
// the report Options.Readiness builds, each finding linked to its
// evidence (the conflicts of the sender, an event that changed, the
// released events).

func (h *Handler) routeReadiness() {
	h.mux.Handle("GET /ui/readiness", h.uiAuth(h.uiReadiness))
	h.mux.Handle("GET /v1/readiness", h.bearer(http.HandlerFunc(h.apiReadiness)))
}

type readinessPage struct {
	Title   string
	Error   string
	Report  readiness.Report
	Senders []readinessSender
}

type readinessSender struct {
	readiness.SenderReport
	Class   string // the verdict as a CSS class
	Answers []struct {
		Status string
		N      int64
	}
}

// readinessReport builds the report for the request's window: ?since= as
// hookonce readiness --since takes it (a date, an RFC 3339 time or a
// duration ago), else since each sender's rules last changed.
func (h *Handler) readinessReport(r *http.Request) (readiness.Report, error) {
	var since time.Time
	if v := r.URL.Query().Get("since"); v != "" {
		t, err := readiness.ParseSince(v, time.Now())
		if err != nil {
			return readiness.Report{}, errBadSince{err}
		}
		since = t
	}
	ctx, cancel := h.storeCtx(r)
	defer cancel()
	return h.o.Readiness(ctx, since)
}

// errBadSince: ?since= is not a time; the caller's mistake, not the
// store's.
type errBadSince struct{ error }

func (h *Handler) uiReadiness(w http.ResponseWriter, r *http.Request) {
	if h.o.Readiness == nil {
		h.render(w, http.StatusNotImplemented, "error.html", errorPage{Title: "Not available",
			Message: "The readiness report needs the admin listener of hookonce serve (it judges the senders of the config in force); hookonce readiness prints it too."})
		return
	}
	rep, err := h.readinessReport(r)
	if bad := (errBadSince{}); errors.As(err, &bad) {
		h.render(w, http.StatusBadRequest, "error.html", errorPage{Title: "Bad request", Message: "since " + bad.Error()})
		return
	}
	if err != nil {
		h.uiStoreError(w, "readiness", err)
		return
	}
	p := readinessPage{Title: "Readiness", Report: rep}
	sender := r.URL.Query().Get("sender")
	for _, s := range rep.Senders {
		if sender != "" && s.Sender != sender {
			continue
		}
		rs := readinessSender{SenderReport: s, Class: "verdict-" + strings.ReplaceAll(s.Verdict, " ", "-")}
		for _, st := range slices.Sorted(maps.Keys(s.Answers)) {
			rs.Answers = append(rs.Answers, struct {
				Status string
				N      int64
			}{st, s.Answers[st]})
		}
		p.Senders = append(p.Senders, rs)
	}
	h.render(w, http.StatusOK, "readiness.html", p)
}

func (h *Handler) apiReadiness(w http.ResponseWriter, r *http.Request) {
	if h.o.Readiness == nil {
		problem.Write(w, http.StatusNotImplemented, "Not available", "the readiness report needs the admin listener of hookonce serve")
		return
	}
	rep, err := h.readinessReport(r)
	if bad := (errBadSince{}); errors.As(err, &bad) {
		problem.Write(w, http.StatusBadRequest, "Bad request", "since "+bad.Error())
		return
	}
	if err != nil {
		h.log.Warn("admin: readiness not built", "err", err)
		problem.Write(w, http.StatusServiceUnavailable, "Store unavailable", "the readiness report could not be read from the store")
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

func msDuration(n int64) string { return (time.Duration(n) * time.Millisecond).String() }

// codeSpans renders a finding's text, which marks config keys and field
// names as `code spans` (as the terminal shows them), for the page: the
// text escaped, each span between a pair of backticks as <code>, so the
// page shows no literal backtick. An odd backtick is left as it is.
func codeSpans(s string) template.HTML {
	var b strings.Builder
	for {
		open := strings.IndexByte(s, '`')
		if open < 0 {
			break
		}
		end := strings.IndexByte(s[open+1:], '`')
		if end < 0 {
			break
		}
		b.WriteString(html.EscapeString(s[:open]))
		b.WriteString("<code>")
		b.WriteString(html.EscapeString(s[open+1 : open+1+end]))
		b.WriteString("</code>")
		s = s[open+1+end+1:]
	}
	b.WriteString(html.EscapeString(s))
	return template.HTML(b.String())
}
