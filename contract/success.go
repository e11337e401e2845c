package contract

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// Success is a sender's rule for telling an applied delivery from one the
// site failed to apply while answering a final status: a 1C-Bitrix payment
// handler answers 200 either way and puts the verdict in the body (trap 21
// in ARCHITECTURE.md). An answer that fails it is passed to the sender,
// not stored, and frees the claim, so the sender's retry runs the handler
// again.
type Success struct {
	// Statuses that count; nil means the sender's final_statuses.
	Statuses *StatusSet
	// At most one of the three below; all nil means the status decides.
	Body        *Template      // the body, whitespace trimmed, equals it
	BodyMatches *regexp.Regexp // the body matches it
	JSON        []JSONWant     // the body is JSON with these fields
}

// JSONWant is one field an answer must hold: a gjson path and a value
// (string, number or bool as written in the config).
type JSONWant struct {
	Path  string
	Value any
}

// Succeeded reports whether the site's answer (status, body) applied the
// delivery req, and when not, why.
func (s *Sender) Succeeded(req *Request, status int, body []byte) (bool, string) {
	su := s.Success
	statuses := s.FinalStatuses
	if su != nil && su.Statuses != nil {
		statuses = *su.Statuses
	}
	if !statuses.Final(status) {
		return false, fmt.Sprintf("status %d is not a success status", status)
	}
	switch {
	case su == nil:
		return true, ""
	case su.Body != nil:
		want := su.Body.Render(req)
		if string(bytes.TrimSpace(body)) != want {
			return false, "the answer's body is not the success body " + su.Body.String()
		}
	case su.BodyMatches != nil:
		if !su.BodyMatches.Match(body) {
			return false, "the answer's body does not match " + strconv.Quote(su.BodyMatches.String())
		}
	case su.JSON != nil:
		if !gjson.ValidBytes(body) {
			return false, "the answer is not JSON"
		}
		for _, w := range su.JSON {
			if !jsonEquals(gjson.GetBytes(body, w.Path), w.Value) {
				return false, fmt.Sprintf("the answer's %s is not %v", w.Path, w.Value)
			}
		}
	}
	return true, ""
}

func jsonEquals(got gjson.Result, want any) bool {
	switch w := want.(type) {
	case string:
		return got.Type == gjson.String && got.Str == w
	case bool:
		return (got.Type == gjson.True && w) || (got.Type == gjson.False && !w)
	case int:
		return got.Type == gjson.Number && got.Num == float64(w)
	case float64:
		return got.Type == gjson.Number && got.Num == w
	case nil:
		return got.Type == gjson.Null
	}
	return false
}

// Template is text with {source.name} parts taken from the request:
// "OK{form.InvId}" answers Robokassa's payment InvId=42 with "OK42".
// "{{" and "}}" stand for literal braces.
type Template struct {
	text  string
	parts []templatePart
}

type templatePart struct {
	lit    string
	src    Source // "" for a literal or the secret
	name   string
	secret bool // {secret}: only in signature messages
}

// ParseTemplate compiles a success body template.
func ParseTemplate(text string) (*Template, error) { return parseTemplate(text, false) }

// parseTemplate compiles text; withSecret allows {secret}, which only a
// signature message may hold.
func parseTemplate(text string, withSecret bool) (*Template, error) {
	t := &Template{text: text}
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			t.parts = append(t.parts, templatePart{lit: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case c == '{' && strings.HasPrefix(text[i:], "{{"), c == '}' && strings.HasPrefix(text[i:], "}}"):
			lit.WriteByte(c)
			i++
		case c == '{':
			end := strings.IndexByte(text[i:], '}')
			if end < 0 {
				return nil, errors.New("unclosed {")
			}
			ref := text[i+1 : i+end]
			flush()
			i += end
			if ref == "secret" && withSecret {
				t.parts = append(t.parts, templatePart{secret: true})
				continue
			}
			src, name, ok := strings.Cut(ref, ".")
			switch Source(src) {
			case FromForm, FromQuery, FromHeader, FromBody, FromRequest:
			default:
				ok = false
			}
			if !ok || name == "" {
				want := "{form.NAME}, {query.NAME}, {request.NAME}, {header.NAME} or {body.PATH}"
				if withSecret {
					want += ", or {secret}"
				}
				return nil, fmt.Errorf("{%s}: want %s", ref, want)
			}
			if Source(src) == FromHeader {
				name = http.CanonicalHeaderKey(name)
			}
			t.parts = append(t.parts, templatePart{src: Source(src), name: name})
		case c == '}':
			return nil, errors.New("unopened }: write }} for a literal brace")
		default:
			lit.WriteByte(c)
		}
	}
	flush()
	return t, nil
}

// Render fills the template from req; an absent value renders empty.
func (t *Template) Render(req *Request) string {
	var b strings.Builder
	for _, p := range t.parts {
		if p.src == "" {
			b.WriteString(p.lit)
			continue
		}
		v, _, _ := req.Value(p.src, p.name)
		b.WriteString(v)
	}
	return strings.TrimSpace(b.String())
}

func (t *Template) String() string { return strconv.Quote(t.text) }

// successFile is a sender's success section in the config file.
//
//	success:
//	  status: 2xx                 # the statuses that count (default final_statuses)
//	  body: "OK{form.InvId}"      # and at most one of: body, body_matches, json
//	  body_matches: "^OK"
//	  json: {code: 0}
type successFile struct {
	Status      *string        `yaml:"status"`
	Body        *string        `yaml:"body"`
	BodyMatches *string        `yaml:"body_matches"`
	JSON        map[string]any `yaml:"json"`
}

func compileSuccess(sf *successFile) (*Success, []Problem) {
	var probs []Problem
	bad := func(field, format string, args ...any) {
		probs = append(probs, Problem{Field: "success." + field, Msg: fmt.Sprintf(format, args...)})
	}
	su := &Success{}
	if sf.Status != nil {
		set, err := ParseStatusSet(*sf.Status)
		if err != nil {
			bad("status", "%v", err)
		}
		su.Statuses = &set
	}
	n := 0
	if sf.Body != nil {
		n++
		t, err := ParseTemplate(*sf.Body)
		if err != nil {
			bad("body", "%v", err)
		}
		su.Body = t
	}
	if sf.BodyMatches != nil {
		n++
		re, err := regexp.Compile(*sf.BodyMatches)
		if err != nil {
			bad("body_matches", "%v", err)
		}
		su.BodyMatches = re
	}
	if sf.JSON != nil {
		n++
		if len(sf.JSON) == 0 {
			bad("json", "name at least one field")
		}
		keys := make([]string, 0, len(sf.JSON))
		for k := range sf.JSON {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			switch v := sf.JSON[k].(type) {
			case string, bool, int, float64, nil:
				su.JSON = append(su.JSON, JSONWant{Path: k, Value: v})
			default:
				bad("json."+k, "want a string, number, boolean or null")
			}
		}
	}
	if n > 1 {
		bad("body", "set at most one of body, body_matches and json")
	}
	return su, probs
}
