package contract

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/hookonce/hookonce/contract/internal/php"
	"github.com/tidwall/gjson"
)

// ErrBadPath is returned by NormalizePath for a path no site would run: a
// malformed escape, a NUL, or ".." above the root.
var ErrBadPath = errors.New("malformed request path")

// ErrLookalikePath is returned by Contract.Locate for a path that differs
// from one a sender owns only in case, trailing dots or spaces, or
// "::$DATA", and is not that sender's already: a site on a
// case-insensitive or Windows file system runs the sender's script for
// it, so it is neither judged by other rules nor passed through. So is,
// on a site with site.multiviews, a path that is a sender's script without
// its extension, alone or with more after it ("/hooks/pay", "/hooks/pay/x"
// for /hooks/pay.php; "/webhooks/payment/index" for a directory's
// index.php): Apache's MultiViews runs the script for it, PATH_INFO and
// all (#33).
var ErrLookalikePath = errors.New("request path looks like a sender's path (case, trailing dots or spaces, or its script without the extension)")

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
	// kept is the path as a server that does not merge slashes resolves
	// it (nginx merge_slashes off, Apache): "/a/b//../x" is "/a/b/x"
	// there, "/a/x" here. When a ".." pops an empty segment the two
	// differ, and no one reading is the site's: refused (#33).
	unmerged := make([]string, 0, cap(segs))
	for i, seg := range strings.Split(p, "/") {
		switch seg {
		case "", ".":
			if seg == "" && i > 0 {
				unmerged = append(unmerged, "")
			}
		case "..":
			if len(segs) == 0 {
				return "", ErrBadPath
			}
			segs = segs[:len(segs)-1]
			if len(unmerged) > 0 {
				if unmerged[len(unmerged)-1] == "" {
					return "", ErrBadPath
				}
				unmerged = unmerged[:len(unmerged)-1]
			}
		default:
			segs = append(segs, seg)
			unmerged = append(unmerged, seg)
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
	Path    string // as written: exact, or a prefix ending in *
	Senders []*Sender
	// Unmatched is UnmatchedReject or UnmatchedPass: written in the file
	// (paths:), or the default (UnmatchedDefault), which is pass exactly
	// when every sender on the path has match.when conditions.
	Unmatched string
	// UnmatchedDefault reports that the file does not set unmatched for
	// this path. A default pass forwards requests whose method some sender
	// accepts and whose conditions hold for none; a written pass forwards
	// any method too.
	UnmatchedDefault bool
}

// settleUnmatched gives a route the file leaves alone its default: pass
// when every sender on it has match.when (the path is shared with what the
// site's own dispatch handles, as Bitrix's sale_ps_result.php: a request
// none of them takes is the site's business, as it was without hookonce),
// reject when one has none (that sender claims the whole path).
func (rt *Route) settleUnmatched() {
	if !rt.UnmatchedDefault {
		return
	}
	rt.Unmatched = UnmatchedPass
	for _, s := range rt.Senders {
		if len(s.When) == 0 {
			rt.Unmatched = UnmatchedReject
		}
	}
}

// UnmatchedReason says in the operator's words why the route's unmatched
// setting is what it is.
func (rt *Route) UnmatchedReason() string {
	if !rt.UnmatchedDefault {
		return "unmatched: " + rt.Unmatched + " (set in paths:)"
	}
	if rt.Unmatched == UnmatchedPass {
		return "unmatched: pass (default: every sender on this path has match.when)"
	}
	for _, s := range rt.Senders {
		if len(s.When) == 0 {
			return "unmatched: reject (default: sender " + s.Name + " has no match.when)"
		}
	}
	return "unmatched: reject"
}

// Shadow reports whether every sender on the route is in shadow mode:
// then hookonce acts as if it were absent for the requests none of them
// takes, and forwards them all.
func (rt *Route) Shadow() bool {
	for _, s := range rt.Senders {
		if !s.Shadow() {
			return false
		}
	}
	return len(rt.Senders) > 0
}

// ForwardsUnmatched reports whether a request with this method that no
// sender on the route takes goes to the site untouched (true) or is
// refused (false: 405 when no sender accepts the method, else 403). Shadow
// routes and a written unmatched: pass forward everything; the default
// pass forwards only methods some sender accepts, so a path keeps its 405
// for the others.
func (rt *Route) ForwardsUnmatched(method string) bool {
	switch {
	case rt.Shadow():
		return true
	case rt.Unmatched != UnmatchedPass:
		return false
	case rt.UnmatchedDefault:
		return rt.AcceptsMethod(method)
	}
	return true
}

// JudgesUnaccepted reports whether a request with a method no sender on
// the route accepts is still read and judged before it is forwarded: the
// route forwards it (a written unmatched: pass, not shadow) and a sender
// on it verifies deliveries, so a signed delivery resent with another
// method (PHP fills $_GET for any method) is refused as a signed sender's
// changed copy (ErrSignedUnmatched) rather than handed on unread.
func (rt *Route) JudgesUnaccepted(method string) bool {
	if rt.AcceptsMethod(method) || !rt.ForwardsUnmatched(method) || rt.Shadow() {
		return false
	}
	for _, s := range rt.Senders {
		if s.HasSignature() {
			return true
		}
	}
	return false
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
	// each sender tried ("does not hold"), one whose value could not be
	// read ("could not be read"), or the conditions that all held.
	Why []string
	// Undecided is why the route cannot tell whether a sender takes the
	// request: a condition's value is there but cannot be read as the site
	// reads it (ErrConditionUnreadable), or the request verifies as a
	// sender's delivery that its match does not take (ErrSignedUnmatched,
	// see Contract.Inspect). Sender is nil, and the request is refused
	// (400), never forwarded as no sender's.
	Undecided error
}

// ErrConditionUnreadable is wrapped by Choice.Undecided when a
// match.when value could not be read as the site reads it (a header sent
// twice or under two spellings CGI merges, a request: name a cookie also
// holds, a value with control characters, a JSON object where a string
// is tested): the site reads something hookonce cannot determine, so the
// request is neither a sender's nor "no sender's" (trap 36).
var ErrConditionUnreadable = errors.New("a match.when value cannot be read as the site reads it")

// Select tries the route's senders in file order and returns the first
// whose method and conditions accept req. A sender with a condition that
// could not be read and none that is false stops the search undecided
// (Choice.Undecided): it might take the request, and it comes first.
func (rt *Route) Select(req *Request) Choice {
	var ch Choice
	for _, s := range rt.Senders {
		if !s.acceptsMethod(req.Method) {
			ch.Why = append(ch.Why, fmt.Sprintf("%s: method %s not accepted", s.Name, req.Method))
			continue
		}
		failed, unread, err := judgeAll(s.When, req)
		if failed != nil {
			ch.Why = append(ch.Why, fmt.Sprintf("%s: %s does not hold", s.Name, failed))
			continue
		}
		if err != nil {
			ch.Why = append(ch.Why, fmt.Sprintf("%s: %s could not be read: %v", s.Name, unread, err))
			ch.Undecided = fmt.Errorf("%w: sender %s: %s: %w", ErrConditionUnreadable, s.Name, unread, err)
			return ch
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

// judgeAll judges every condition in cs: the first that is false
// (failed), else the first whose value could not be read (unread, err);
// all nil when every one holds.
func judgeAll(cs []Condition, req *Request) (failed, unread *Condition, err error) {
	for i := range cs {
		ok, e := cs[i].Judge(req)
		switch {
		case e != nil:
			if err == nil {
				unread, err = &cs[i], e
			}
		case !ok:
			return &cs[i], nil, nil
		}
	}
	return nil, unread, err
}

// router finds the route of a normalised path with map lookups only: the
// exact path, each script prefix of it ("/a.php" of "/a.php/x"), the
// aliases the site's index and extension rules give a sender path, and
// each length at which some prefix route ends.
type router struct {
	site       Site
	exact      map[string]*Route
	alias      map[string]alias    // other paths that run a sender path's script
	prefix     map[string]*Route   // keyed by the prefix without its *
	prefixLens []int               // distinct prefix lengths, longest first
	routes     []*Route            // in file order of their first sender
	claimed    map[string][]*Route // alias → every route that claims it, for warnings
	stems      map[string]*Route   // a route's script without its extension (MultiViews)
	// fold holds every key above folded (see foldPath), to refuse the
	// look-alikes of owned paths; foldSame: every key is its own fold.
	fold     *router
	foldSame bool
}

// How an alias came about; the lower wins when two routes claim one path.
const (
	viaIndex     = 1 // a directory's index script, or the directory of one
	viaExtension = 2 // a path the site adds an extension to, or the path with it
)

type alias struct {
	route    *Route
	via      int
	pathInfo bool // also owns "key/anything" (PHP's PATH_INFO)
}

func newRouter(site Site) *router {
	rt := newPlainRouter(site)
	rt.fold = newPlainRouter(Site{Index: foldAll(site.Index), Extensions: foldAll(site.Extensions)})
	rt.foldSame = true
	return rt
}

func newPlainRouter(site Site) *router {
	return &router{site: site, exact: map[string]*Route{}, alias: map[string]alias{}, claimed: map[string][]*Route{}, prefix: map[string]*Route{}, stems: map[string]*Route{}}
}

func (rt *router) add(s *Sender) *Route {
	key, isPrefix := strings.CutSuffix(s.Path, "*")
	m := rt.exact
	if isPrefix {
		m = rt.prefix
	}
	r := m[key]
	if r == nil {
		r = &Route{Path: s.Path, Unmatched: UnmatchedReject, UnmatchedDefault: true}
		rt.routes = append(rt.routes, r)
		rt.addKey(key, isPrefix, r)
		if rt.fold != nil {
			fk := foldPath(key)
			rt.fold.addKey(fk, isPrefix, r)
			if fk != key {
				rt.foldSame = false
			}
		}
	}
	r.Senders = append(r.Senders, s)
	return r
}

// addStems records what Apache's MultiViews runs the script of exact key
// r for (site.multiviews): the path without the script's extension, a
// directory's index script's too.
func (rt *router) addStems(key string, r *Route) {
	stem := func(script string) {
		last := script[strings.LastIndexByte(script, '/')+1:]
		if dot := strings.LastIndexByte(last, '.'); dot > 0 {
			rt.stems[script[:len(script)-len(last)+dot]] = r
		}
	}
	if scriptLike(key) {
		stem(key)
		return
	}
	for _, name := range rt.site.Index {
		stem(strings.TrimSuffix(key, "/") + "/" + name)
	}
}

// addKey files route r under a path key (a prefix without its *) and,
// for an exact path, under every alias the site's rules give it.
func (rt *router) addKey(key string, isPrefix bool, r *Route) {
	if isPrefix {
		rt.prefix[key] = r
		if !slices.Contains(rt.prefixLens, len(key)) {
			rt.prefixLens = append(rt.prefixLens, len(key))
			sort.Sort(sort.Reverse(sort.IntSlice(rt.prefixLens)))
		}
		return
	}
	rt.exact[key] = r
	if rt.site.MultiViews {
		rt.addStems(key, r)
	}
	put := func(k string, via int, pathInfo bool) {
		if k == key || k == "" {
			return
		}
		if !slices.Contains(rt.claimed[k], r) {
			rt.claimed[k] = append(rt.claimed[k], r)
		}
		if a, ok := rt.alias[k]; ok {
			if a.via <= via {
				return
			}
		}
		rt.alias[k] = alias{route: r, via: via, pathInfo: pathInfo}
	}
	// stripped files the path the site adds an extension to: "/x/cb" for
	// "/x/cb.php".
	stripped := func(script string) {
		for _, ext := range rt.site.Extensions {
			if base, ok := strings.CutSuffix(script, ext); ok && !strings.HasSuffix(base, "/") {
				put(base, viaExtension, false)
			}
		}
	}
	if scriptLike(key) {
		// "/x/index.php": "/x" and "/x/" run it too.
		slash := strings.LastIndexByte(key, '/')
		if slices.Contains(rt.site.Index, key[slash+1:]) {
			put(cmp.Or(key[:slash], "/"), viaIndex, false)
		}
		stripped(key)
		return
	}
	// A directory: its index scripts, with PATH_INFO; "/x.php" when the
	// site tries extensions.
	for _, name := range rt.site.Index {
		script := strings.TrimSuffix(key, "/") + "/" + name
		put(script, viaIndex, scriptLike(script))
		stripped(script)
	}
	if key != "/" {
		for _, ext := range rt.site.Extensions {
			put(key+ext, viaExtension, true)
		}
	}
}

// find returns the most specific route for a normalised path: the exact
// path, then the longest script path it runs through PATH_INFO, then an
// alias (index before extension; the path itself before a PATH_INFO
// prefix of it), then the longest prefix; nil when no sender names it.
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
	if len(rt.alias) > 0 {
		if a, ok := rt.alias[path]; ok {
			return a.route
		}
		for i := len(path) - 1; i > 0; i-- {
			if path[i] != '/' {
				continue
			}
			if a, ok := rt.alias[path[:i]]; ok && a.pathInfo {
				return a.route
			}
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

// lookalike reports whether path, found on route found (nil: none),
// folds onto a path of another route: a site on a case-insensitive file
// system (Windows, macOS) or one that drops trailing dots and spaces
// (Windows) may run that route's script for it.
func (rt *router) lookalike(path string, found *Route) bool {
	// A script without its extension (site.multiviews), unless a sender
	// names the path itself.
	for p := path; len(rt.stems) > 0 && p != "" && rt.exact[path] == nil; p = p[:strings.LastIndexByte(p, '/')] {
		if r := rt.stems[p]; r != nil && r != found {
			return true
		}
	}
	f := foldPath(path)
	if f == path && rt.foldSame {
		return false // the fold router answers as find did
	}
	r := rt.fold.find(f)
	return r != nil && r != found
}

// conflicts names the pairs of routes whose paths run one script by the
// site's index and extension rules: each spelling of it is judged by one
// route's senders only (exact, then index, then extension), which is
// seldom what the operator meant.
func (rt *router) conflicts(file string) []string {
	pairs := map[[2]*Route]bool{}
	for k, claimants := range rt.claimed {
		all := claimants
		if e := rt.exact[k]; e != nil && !slices.Contains(all, e) {
			all = append([]*Route{e}, all...)
		}
		for i, x := range all {
			for _, y := range all[i+1:] {
				if slices.Index(rt.routes, y) < slices.Index(rt.routes, x) {
					x, y = y, x
				}
				pairs[[2]*Route{x, y}] = true
			}
		}
	}
	var out []string
	for i, x := range rt.routes {
		for _, y := range rt.routes[i+1:] {
			if pairs[[2]*Route{x, y}] {
				out = append(out, fmt.Sprintf("%s: paths %s and %s run one script (site: index, extensions); each spelling of it gets one path's senders only (docs/decision-table.md: the path rule)",
					file, x.Path, y.Path))
			}
		}
	}
	return out
}

// foldPath is the path as a case-insensitive file system that drops
// trailing dots and spaces sees it (Windows): lower case, and each
// segment without trailing dots, spaces or "::$DATA". It costs nothing for
// a path that is already folded.
func foldPath(p string) string {
	if !needsFold(p) {
		return p
	}
	segs := strings.Split(strings.ToLower(p), "/")
	for i, seg := range segs {
		seg = strings.TrimSuffix(seg, "::$data")
		if t := strings.TrimRight(seg, ". "); t != "" {
			seg = t
		}
		segs[i] = seg
	}
	return strings.Join(segs, "/")
}

func needsFold(p string) bool {
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c >= 'A' && c <= 'Z', c >= 0x80, c == ':':
			return true
		case c == '.' || c == ' ':
			if i+1 == len(p) || p[i+1] == '/' {
				return true
			}
		}
	}
	return false
}

func foldAll(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = foldPath(n)
	}
	return out
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

// allHold reports whether every condition in cs holds for req (true for
// none). err is why one could not be read (and none is false): neither
// true nor false.
func allHold(cs []Condition, req *Request) (bool, error) {
	failed, _, err := judgeAll(cs, req)
	if failed != nil {
		return false, nil
	}
	return err == nil, err
}

// Judge reports whether the condition is true for req. A value that is
// absent as the site reads it is absent (a form condition on a JSON body:
// the site's $_POST is empty too); one that is there but cannot be read
// as the site reads it is an error, neither true nor false: for equals
// and matches, a header sent more than once (or under spellings CGI
// merges), an array, a JSON value that is no string or number, a value
// with control characters a trim or a strip would change the verdict of
// (such values are present to a present condition); for any condition,
// an ambiguous request: name.
func (c Condition) Judge(req *Request) (bool, error) {
	v, ok, err := req.Value(c.Source, c.Name)
	if err != nil {
		switch {
		case errors.Is(err, errNotJSON) || errors.Is(err, errNotForm):
			return c.Present != nil && !*c.Present, nil
		case c.Present != nil && isThere(err):
			// Sent twice, an array, a boolean: there, as isset() sees it.
			return *c.Present, nil
		}
		return false, err
	}
	if c.Present != nil {
		return ok == *c.Present, nil
	}
	if !ok {
		return false, nil
	}
	held := c.test(v)
	if strings.IndexFunc(v, unicode.IsControl) >= 0 {
		// A site may compare the value as it is, trim() it, or strip
		// control characters: unless all three agree, it is unreadable.
		if c.test(strings.Trim(v, " \t\n\r\x00\x0b")) != held || c.test(strings.Map(dropControl, v)) != held {
			return false, errors.New("the value holds control characters, and a site that trims or strips them reads it otherwise")
		}
	}
	return held, nil
}

// test is the condition's equals or matches on a value that is there.
func (c Condition) test(v string) bool {
	switch {
	case c.Equals != nil:
		return v == *c.Equals
	case c.Matches != nil:
		return c.Matches.MatchString(v)
	}
	return false
}

func dropControl(r rune) rune {
	if unicode.IsControl(r) {
		return -1
	}
	return r
}

func (c Condition) String() string {
	if c.Source == FromWCAPI && c.Equals != nil {
		return fmt.Sprintf("wc_api %q", *c.Equals)
	}
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
	Header  string `yaml:"header"`
	Query   string `yaml:"query"`
	Form    string `yaml:"form"`
	Body    string `yaml:"body"`
	Request string `yaml:"request"`
	// WCAPI: the WooCommerce API handler the request runs is this one.
	WCAPI   string  `yaml:"wc_api"`
	Equals  *string `yaml:"equals"`
	Present *bool   `yaml:"present"`
	Matches *string `yaml:"matches"`
}

func compileCondition(cf conditionFile) (Condition, error) {
	var c Condition
	if cf.WCAPI != "" {
		if cf.Header+cf.Query+cf.Form+cf.Body+cf.Request != "" || cf.Equals != nil || cf.Present != nil || cf.Matches != nil {
			return c, errors.New("wc_api stands alone: { wc_api: robokassa_result }")
		}
		name := strings.ToLower(cf.WCAPI)
		if sanitizeKey(name) != name {
			return c, fmt.Errorf("wc_api %q: WooCommerce keeps only a-z, 0-9, _ and - of a handler name; write it as the gateway registers it (woocommerce_api_<name>)", cf.WCAPI)
		}
		return Condition{Source: FromWCAPI, Name: "wc-api", Equals: &name}, nil
	}
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
		return c, errors.New("set exactly one of header, query, form, body, request or wc_api")
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

// overlaps names each sender that a sender before it on the same path
// takes every request from, for some method both accept: the first has no
// match.when, or each of its conditions holds whenever the later one's
// all hold. Senders are tried in file order, so the later one never gets
// such a request (its key, signature and success rule never apply).
func (rt *router) overlaps(file string) []string {
	var out []string
	for _, r := range rt.routes {
		for j, b := range r.Senders {
			for _, a := range r.Senders[:j] {
				methods := sharedMethods(a, b)
				if methods == "" || !covers(a.When, b.When) {
					continue
				}
				why := "its match.when conditions hold whenever " + b.Name + "'s do"
				if len(a.When) == 0 {
					why = "it has no match.when"
				}
				out = append(out, fmt.Sprintf("%s: senders %q and %q can take the same request (path %s, %s): %s is listed first and %s, so %s never gets one; give them match.when conditions that tell them apart (docs/configuration.md: senders on one path)",
					file, a.Name, b.Name, r.Path, methods, a.Name, why, b.Name))
				break
			}
		}
	}
	return out
}

// sharedMethods names the methods both senders accept ("" for none).
func sharedMethods(a, b *Sender) string {
	switch {
	case a.Methods == nil && b.Methods == nil:
		return "any method"
	case a.Methods == nil:
		return strings.Join(b.Methods, ", ")
	case b.Methods == nil:
		return strings.Join(a.Methods, ", ")
	}
	var both []string
	for _, m := range b.Methods {
		if slices.Contains(a.Methods, m) {
			both = append(both, m)
		}
	}
	return strings.Join(both, ", ")
}

// covers reports whether every condition of first holds whenever all of
// later's conditions hold, as far as the conditions themselves show it.
func covers(first, later []Condition) bool {
	for _, a := range first {
		if !slices.ContainsFunc(later, func(b Condition) bool { return implies(b, a) }) {
			return false
		}
	}
	return true
}

// implies reports whether condition a holds whenever b holds: both read
// the same value, and b's test is at least as strict as a's.
func implies(b, a Condition) bool {
	if a.Source != b.Source || a.Name != b.Name {
		return false
	}
	switch {
	case a.Present != nil && *a.Present:
		return (b.Present != nil && *b.Present) || b.Equals != nil || b.Matches != nil
	case a.Present != nil:
		return b.Present != nil && !*b.Present
	case a.Equals != nil:
		return b.Equals != nil && *b.Equals == *a.Equals
	case a.Matches != nil:
		return (b.Equals != nil && a.Matches.MatchString(*b.Equals)) ||
			(b.Matches != nil && b.Matches.String() == a.Matches.String())
	}
	return false
}

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
