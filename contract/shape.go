// A request's shape: what it looks like without a single value, for the
// log and the traffic counters of requests no sender took.

package contract

import (
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/hookonce/hookonce/contract/internal/php"
	"github.com/tidwall/gjson"
)

// Shape describes a request without a single value, for the log line of
// a request on a sender's path that no sender took and for the readiness
// report's counts of deliveries without an event id: its method, content
// type and the names (never the values) of its query parameters, form
// fields, JSON top-level members and of the headers that tell a provider
// apart, at most maxShapeNames each, sorted. A body larger than
// maxShapeBody is not read for names (Large): the work spent on a request
// nobody vouched for stays bounded (trap 30 in ARCHITECTURE.md).
type Shape struct {
	Method      string
	ContentType string
	Query       []string
	Form        []string
	JSON        []string
	Headers     []string
	Large       bool
}

const (
	maxShapeNames   = 24
	maxShapeNameLen = 48
	maxShapeBody    = 64 << 10
)

// notableHeader names the headers that tell a provider apart (signatures,
// event types, webhook ids): their names go into a shape, never values.
var notableHeader = regexp.MustCompile(`(?i)sign|webhook|event|hook|hmac|token|delivery|topic`)

// Shape returns what the request looks like (see Shape).
func (q *Request) Shape() Shape {
	sh := Shape{Method: q.Method, ContentType: shapeName(contentTypeWord(q.Header.Get("Content-Type")))}
	sh.Query = topNames(q.queryVars())
	for h := range q.Header {
		if notableHeader.MatchString(h) {
			sh.Headers = append(sh.Headers, h)
		}
	}
	sh.Headers = boundNames(sh.Headers)
	if len(q.Body) > maxShapeBody {
		sh.Large = true
		return sh
	}
	if f, err := q.Form(); err == nil {
		sh.Form = topNames(f)
	}
	if root, err := q.jsonRoot(); err == nil && root.IsObject() {
		var names []string
		root.ForEach(func(k, _ gjson.Result) bool {
			names = append(names, k.Str)
			return len(names) <= 4*maxShapeNames
		})
		sh.JSON = boundNames(names)
	}
	return sh
}

// String is the shape on one line: "POST; query: a,b; json: c,d;
// headers: X-Sig" ("…" where names were left out).
func (sh Shape) String() string {
	parts := []string{sh.Method}
	for _, p := range []struct {
		label string
		names []string
	}{{"query", sh.Query}, {"form", sh.Form}, {"json", sh.JSON}} {
		if len(p.names) > 0 {
			parts = append(parts, p.label+": "+strings.Join(p.names, ","))
		}
	}
	if sh.Large {
		ct := sh.ContentType
		if ct == "" {
			ct = "no content type"
		}
		parts = append(parts, "body: "+ct+" (large)")
	}
	if len(sh.Headers) > 0 {
		parts = append(parts, "headers: "+strings.Join(sh.Headers, ","))
	}
	return strings.Join(parts, "; ")
}

func contentTypeWord(ct string) string {
	ct, _, _ = strings.Cut(ct, ";")
	return strings.TrimSpace(ct)
}

func topNames(v *php.Var) []string {
	if v == nil {
		return nil
	}
	names := make([]string, 0, 4*maxShapeNames)
	for k := range v.Names() {
		if names = append(names, k); len(names) > 4*maxShapeNames {
			break
		}
	}
	return boundNames(names)
}

// boundNames cleans, sorts and de-duplicates names, keeping at most
// maxShapeNames and marking the cut with "…".
func boundNames(names []string) []string {
	for i, n := range names {
		names[i] = shapeName(n)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	if len(names) > maxShapeNames {
		names = append(names[:maxShapeNames], "…")
	}
	return names
}

// shapeName makes a name safe for a log line and for a shape's own
// separators: control bytes, "," and ";" become "_", at most
// maxShapeNameLen bytes (cut on a character boundary, marked "…").
func shapeName(n string) string {
	n = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == ',' || r == ';' || r == utf8.RuneError {
			return '_'
		}
		return r
	}, n)
	if len(n) > maxShapeNameLen {
		cut := maxShapeNameLen
		for cut > 0 && !utf8.RuneStart(n[cut]) {
			cut--
		}
		n = n[:cut] + "…"
	}
	return n
}
