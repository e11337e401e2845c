package contract

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// ErrBadPath is returned by NormalizePath for a path no site would run: a
// malformed escape, a NUL, or ".." above the root.
var ErrBadPath = errors.New("malformed request path")

// NormalizePath returns the path a site behind nginx or Apache will run for
// an escaped request path: every %XX decoded (nginx decodes %2F too),
// repeated slashes merged, "." and ".." segments resolved, and a trailing
// slash dropped. The site may see other variants of one script
// ("//a.php", "/./a.php", "/x/../a.php", "/a.php/") as that script; matching
// on this form is what keeps them from slipping past a sender's rules
// (trap 19 in ARCHITECTURE.md).
func NormalizePath(escaped string) (string, error) {
	if isNormal(escaped) {
		return escaped, nil // the common case costs no allocation
	}
	return normalize(escaped)
}

func normalize(escaped string) (string, error) {
	p, err := url.PathUnescape(escaped)
	if err != nil || strings.IndexByte(p, 0) >= 0 {
		return "", ErrBadPath
	}
	segs := make([]string, 0, strings.Count(p, "/")+1)
	for seg := range strings.SplitSeq(p, "/") {
		switch seg {
		case "", ".":
		case "..":
			if len(segs) == 0 {
				return "", ErrBadPath
			}
			segs = segs[:len(segs)-1]
		default:
			segs = append(segs, seg)
		}
	}
	return "/" + strings.Join(segs, "/"), nil
}

// isNormal reports whether p is already in NormalizePath's form: rooted,
// no escapes, no empty, "." or ".." segments, no trailing slash.
func isNormal(p string) bool {
	if p == "/" {
		return true
	}
	if len(p) < 2 || p[0] != '/' || p[len(p)-1] == '/' || strings.IndexByte(p, '%') >= 0 || strings.IndexByte(p, 0) >= 0 {
		return false
	}
	for i := 0; i < len(p); i++ {
		if p[i] != '/' {
			continue
		}
		rest := p[i+1:]
		if rest == "" || rest[0] == '/' || rest == "." || rest == ".." ||
			strings.HasPrefix(rest, "./") || strings.HasPrefix(rest, "../") {
			return false
		}
	}
	return true
}

// scriptLike reports whether a sender path names a file (its last segment
// has an extension, as x.php): PHP runs such a script for "x.php/anything"
// too, with the rest in PATH_INFO.
func scriptLike(path string) bool {
	last := path[strings.LastIndexByte(path, '/')+1:]
	return strings.LastIndexByte(last, '.') > 0
}

// Unmatched settings: what a request on a sender's path gets when no sender
// on that path accepts it.
const (
	UnmatchedReject = "reject"
	UnmatchedPass   = "pass"
)

// Route is every sender that names one path, in file order, and what a
// request on that path that none of them accepts gets.
type Route struct {
	Path      string // as written: exact, or a prefix ending in *
	Senders   []*Sender
	Unmatched string // UnmatchedReject or UnmatchedPass
}

// Allowed returns the methods some sender on the route accepts, sorted;
// nil when one accepts any method.
func (rt *Route) Allowed() []string {
	var out []string
	for _, s := range rt.Senders {
		if s.Methods == nil {
			return nil
		}
		for _, m := range s.Methods {
			if !slices.Contains(out, m) {
				out = append(out, m)
			}
		}
	}
	sort.Strings(out)
	return out
}

// AcceptsMethod reports whether some sender on the route takes method.
func (rt *Route) AcceptsMethod(method string) bool {
	for _, s := range rt.Senders {
		if s.acceptsMethod(method) {
			return true
		}
	}
	return false
}

// Choice is how a route judged one request: the sender that takes it, or
// nil and why none did.
type Choice struct {
	Sender *Sender
	// Why says which condition decided: the first failing condition of
	// each sender tried, or the conditions that all held.
	Why []string
}

// Select tries the route's senders in file order and returns the first
// whose method and conditions accept req.
func (rt *Route) Select(req *Request) Choice {
	var ch Choice
	for _, s := range rt.Senders {
		if !s.acceptsMethod(req.Method) {
			ch.Why = append(ch.Why, fmt.Sprintf("%s: method %s not accepted", s.Name, req.Method))
			continue
		}
		failed := ""
		for _, c := range s.When {
			if !c.Holds(req) {
				failed = c.String()
				break
			}
		}
		if failed != "" {
			ch.Why = append(ch.Why, fmt.Sprintf("%s: %s does not hold", s.Name, failed))
			continue
		}
		ch.Sender = s
		if len(s.When) == 0 {
			ch.Why = append(ch.Why, s.Name+": no conditions")
		} else {
			held := make([]string, len(s.When))
			for i, c := range s.When {
				held[i] = c.String()
			}
			ch.Why = append(ch.Why, s.Name+": "+strings.Join(held, " and ")+" hold")
		}
		return ch
	}
	return ch
}

// router finds the route of a normalised path with map lookups only: the
// exact path, each script prefix of it ("/a.php" of "/a.php/x"), and each
// length at which some prefix route ends.
type router struct {
	exact      map[string]*Route
	prefix     map[string]*Route // keyed by the prefix without its *
	prefixLens []int             // distinct prefix lengths, longest first
	routes     []*Route          // in file order of their first sender
}

func newRouter() *router {
	return &router{exact: map[string]*Route{}, prefix: map[string]*Route{}}
}

func (rt *router) add(s *Sender) *Route {
	key, isPrefix := strings.CutSuffix(s.Path, "*")
	m := rt.exact
	if isPrefix {
		m = rt.prefix
	}
	r := m[key]
	if r == nil {
		r = &Route{Path: s.Path, Unmatched: UnmatchedReject}
		m[key] = r
		rt.routes = append(rt.routes, r)
		if isPrefix && !slices.Contains(rt.prefixLens, len(key)) {
			rt.prefixLens = append(rt.prefixLens, len(key))
			sort.Sort(sort.Reverse(sort.IntSlice(rt.prefixLens)))
		}
	}
	r.Senders = append(r.Senders, s)
	return r
}

// find returns the most specific route for a normalised path: the exact
// path, then the longest script path it runs through PATH_INFO, then the
// longest prefix; nil when no sender names it.
func (rt *router) find(path string) *Route {
	if r := rt.exact[path]; r != nil {
		return r
	}
	for i := len(path) - 1; i > 0; i-- {
		if path[i] != '/' {
			continue
		}
		if r := rt.exact[path[:i]]; r != nil && scriptLike(r.Path) {
			return r
		}
	}
	if r := rt.prefix[path+"/"]; r != nil { // "/hooks" for "/hooks/*"
		return r
	}
	for _, n := range rt.prefixLens {
		if n <= len(path) {
			if r := rt.prefix[path[:n]]; r != nil {
				return r
			}
		}
	}
	return nil
}

// Route returns the route for a normalised path, or nil when no sender
// names it (the request is passed through untouched).
func (c *Contract) Route(path string) *Route {
	if c.router == nil {
		return nil
	}
	return c.router.find(path)
}

// Routes lists every route in file order.
func (c *Contract) Routes() []*Route {
	if c.router == nil {
		return nil
	}
	return c.router.routes
}

// Condition is one match.when entry: a value read as the site reads it
// (see Request) that must equal a string, match a regexp, or be present or
// absent.
type Condition struct {
	Source  Source
	Name    string
	Equals  *string
	Present *bool
	Matches *regexp.Regexp
}

// Holds reports whether the condition is true for req. A value that cannot
// be read (a form condition on a JSON body) is absent.
func (c Condition) Holds(req *Request) bool {
	v, ok, err := req.Value(c.Source, c.Name)
	if err != nil {
		ok = false
	}
	switch {
	case c.Present != nil:
		return ok == *c.Present
	case c.Equals != nil:
		return ok && v == *c.Equals
	case c.Matches != nil:
		return ok && c.Matches.MatchString(v)
	}
	return false
}

func (c Condition) String() string {
	s := string(c.Source) + " " + c.Name
	switch {
	case c.Present != nil && *c.Present:
		return s + " present"
	case c.Present != nil:
		return s + " absent"
	case c.Equals != nil:
		return fmt.Sprintf("%s equals %q", s, *c.Equals)
	case c.Matches != nil:
		return fmt.Sprintf("%s matches %q", s, c.Matches.String())
	}
	return s
}

type conditionFile struct {
	Header  string  `yaml:"header"`
	Query   string  `yaml:"query"`
	Form    string  `yaml:"form"`
	Body    string  `yaml:"body"`
	Request string  `yaml:"request"`
	Equals  *string `yaml:"equals"`
	Present *bool   `yaml:"present"`
	Matches *string `yaml:"matches"`
}

func compileCondition(cf conditionFile) (Condition, error) {
	var c Condition
	n := 0
	for _, x := range []struct {
		src  Source
		name string
	}{{FromHeader, cf.Header}, {FromQuery, cf.Query}, {FromForm, cf.Form}, {FromBody, cf.Body}, {FromRequest, cf.Request}} {
		if x.name != "" {
			c.Source, c.Name = x.src, x.name
			n++
		}
	}
	if n != 1 {
		return c, errors.New("set exactly one of header, query, form, body or request")
	}
	if c.Source == FromHeader {
		c.Name = http.CanonicalHeaderKey(c.Name)
	}
	n = 0
	if cf.Equals != nil {
		c.Equals = cf.Equals
		n++
	}
	if cf.Present != nil {
		c.Present = cf.Present
		n++
	}
	if cf.Matches != nil {
		re, err := regexp.Compile(*cf.Matches)
		if err != nil {
			return c, fmt.Errorf("matches: %v", err)
		}
		c.Matches = re
		n++
	}
	if n != 1 {
		return c, errors.New("set exactly one of equals, present or matches")
	}
	return c, nil
}
