package contract

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/hookonce/hookonce/contract/internal/php"
	"github.com/tidwall/gjson"
)

// Request is one delivery as the site behind hookonce will read it: the
// path it will run, its headers, and its query, form and JSON values read
// with PHP's rules (package contract/internal/php). Keys, match conditions, signatures and
// success templates all read values through it, so they agree with each
// other and with the site. Parsed parts are built on first use; a Request
// is used by one goroutine.
type Request struct {
	Method   string
	Path     string // as the site will run it: NormalizePath of the URL's path
	Header   http.Header
	RawQuery string
	Body     []byte
	// Client is the sender's address: the peer, or the address a trusted
	// proxy forwarded (see Contract.ClientAddr). Invalid when unknown.
	Client netip.Addr

	query, form *php.Var
	request     *php.Var // query overlaid with form (FromRequest)
	ambiguous   []string // top-level names $_REQUEST and $request->get() read differently
	// getPost: the site reads request: names as array_merge($_GET,
	// $_POST) only (site.request: get_post, 1C-Bitrix's $request->get()),
	// never from cookies.
	getPost  bool
	formErr  error
	canon    []byte // the body canonicalised, for paths that need gjson syntax
	jsonErr  error  // the body is not JSON to PHP
	jsonDone bool
}

// NewRequest wraps an incoming request whose body has been read whole.
// path is the normalised path (NormalizePath). Its headers are read under
// the names the site reads them by (CGIHeader).
func NewRequest(r *http.Request, path string, body []byte, client netip.Addr) *Request {
	return &Request{Method: r.Method, Path: path, Header: CGIHeader(r.Header), RawQuery: r.URL.RawQuery, Body: body, Client: client}
}

// Request is NewRequest with the site's reading of request: names
// (site.request): what Inspect and a redelivery judge.
func (c *Contract) Request(r *http.Request, path string, body []byte) *Request {
	q := NewRequest(r, path, body, c.ClientAddr(r.RemoteAddr, r.Header))
	q.getPost = c.Site.Request == SiteRequestGetPost
	return q
}

// Source says where a value is read from.
type Source string

const (
	FromHeader Source = "header"
	FromBody   Source = "body" // a gjson path into a JSON body
	FromQuery  Source = "query"
	FromForm   Source = "form" // an urlencoded or multipart form field, PHP bracket names allowed
	// FromRequest is a query or form field as Bitrix's $request->get() and
	// PHP's $_REQUEST read it: the query merged with the form, a form field
	// replacing the query's field of the same top-level name. Payment
	// gateways that may call back with GET or POST (Robokassa, the RBS
	// gateways) are read from here.
	FromRequest Source = "request"
	// FromWCAPI is the WooCommerce API handler the request runs
	// (woocommerce_api_<name>), read as WooCommerce reads it on any URL
	// of the shop: wcAPI. Its name is ignored.
	FromWCAPI Source = "wc_api"
)

// errNotJSON and errNotForm say why a body value cannot be read.
var (
	errNotJSON = errors.New("body is not JSON")
	errNotForm = errors.New("body is not a form (application/x-www-form-urlencoded or multipart/form-data)")
)

// Value returns the value named name in src as the site reads it. ok is
// false when it is absent (or, in a JSON body, null or an object); err says
// why the body could not be read as the source asks (not JSON, not a form)
// or why the value cannot be a string (a JSON array, true/false).
func (q *Request) Value(src Source, name string) (v string, ok bool, err error) {
	switch src {
	case FromHeader:
		vals := q.Header.Values(name)
		switch len(vals) {
		case 0:
			return "", false, nil
		case 1:
			return strings.TrimSpace(vals[0]), true, nil
		}
		// The site's stack may join repeats, or keep the first or the
		// last: no one reading is safe.
		return "", false, thereError("header sent more than once")
	case FromQuery:
		return lookup(q.queryVars(), name)
	case FromForm:
		f, err := q.Form()
		if err != nil {
			return "", false, err
		}
		return lookup(f, name)
	case FromRequest:
		if q.requestAmbiguous(name) {
			return "", false, errAmbiguousRequest
		}
		return lookup(q.requestVars(), name)
	case FromWCAPI:
		return q.wcAPI()
	case FromBody:
		res, err := q.bodyPath(name)
		if err != nil {
			return "", false, err
		}
		switch res.Type {
		case gjson.String:
			return res.Str, true, nil
		case gjson.Number:
			v, ok := php.Number(res.Raw)
			if !ok {
				return "", false, thereError("not a number PHP can read")
			}
			return v, true, nil
		case gjson.Null:
			return "", false, nil
		case gjson.True, gjson.False:
			return "", false, thereError("a boolean, not a string or number")
		default:
			if !res.Exists() {
				return "", false, nil
			}
			return "", false, thereError("an object or array, not a string or number")
		}
	case FromJWT:
		return jwtValue(q.Body, name)
	}
	return "", false, fmt.Errorf("unknown source %q", src)
}

// errArray: the name holds an array (a[]=…, a[x]=…) where a string is
// read. PHP's isset() and a truthy test see it, an === sees no string:
// unreadable, never absent.
var errArray error = thereError("an array, not a string")

// thereError says why a value that is there cannot be read as one
// string: present to the site (isset() holds), unreadable to an equals.
type thereError string

func (e thereError) Error() string { return string(e) }

// isThere reports whether err says the value is there, though not as one
// string.
func isThere(err error) bool {
	var t thereError
	return errors.As(err, &t)
}

func lookup(v *php.Var, name string) (string, bool, error) {
	s, ok := v.Lookup(name)
	if !ok && v.IsArray(name) {
		return "", false, errArray
	}
	return s, ok, nil
}

// ErrUnreadableBody is wrapped by Unreadable (and by Form, Value and
// Fields for a form source) when PHP would parse the body as a form but
// hookonce cannot read it exactly as PHP would.
var ErrUnreadableBody = errors.New("form body cannot be read as PHP reads it")

func unreadable(reason string) error {
	return fmt.Errorf("%w: %s", ErrUnreadableBody, reason)
}

// maxPostSize is PHP's default post_max_size (8M): a larger body gives the
// site an empty $_POST, or whatever its own setting lets through.
const maxPostSize = 8 << 20

// formKind is the form type PHP's SAPI finds in a Content-Type value: the
// value lowercased and cut at its first ";", "," or space, then matched
// exactly (sapi_read_post_data). "" when PHP parses no form.
func formKind(ct string) string {
	if i := strings.IndexAny(ct, ";, "); i >= 0 {
		ct = ct[:i]
	}
	switch ct = strings.ToLower(ct); ct {
	case "application/x-www-form-urlencoded", "multipart/form-data":
		return ct
	}
	return ""
}

// Unreadable returns an error wrapping ErrUnreadableBody when PHP would
// parse the body as a form ($_POST: method exactly POST, a form content
// type by PHP's rule) but hookonce cannot read it exactly as PHP would: a
// Content-Type sent more than once, a body over post_max_size, or a
// multipart shape that is not modelled (see contract/internal/php/multipart.go). It is nil for
// every other request, and costs no parsing when the body is not a form.
func (q *Request) Unreadable() error {
	if strings.IndexByte(q.RawQuery, '[') >= 0 && q.queryVars().Over() {
		return unreadable(fmt.Sprintf("a query that builds more than %d arrays", php.MaxFormArrays))
	}
	// Form reads the Content-Type once and answers errNotForm, or an
	// empty $_POST for a method other than POST, without parsing.
	if _, err := q.Form(); errors.Is(err, ErrUnreadableBody) {
		return err
	}
	return nil
}

// Form returns the body's form fields as PHP 8.2's $_POST holds them: empty
// unless the method is exactly POST, read with PHP's urlencoded or
// multipart rules (contract/internal/php). The error is errNotForm when
// PHP would not parse the body as a form, and wraps ErrUnreadableBody when
// hookonce cannot read it as PHP would.
func (q *Request) Form() (*php.Var, error) {
	if q.form != nil || q.formErr != nil {
		return q.form, q.formErr
	}
	q.form, q.formErr = q.readForm()
	return q.form, q.formErr
}

func (q *Request) readForm() (*php.Var, error) {
	cts := q.Header["Content-Type"] // canonical: Values would canonicalise it
	if len(cts) == 0 {
		return nil, errNotForm
	}
	anyForm := false
	for _, ct := range cts {
		anyForm = anyForm || formKind(ct) != ""
	}
	if !anyForm {
		return nil, errNotForm
	}
	if q.Method != http.MethodPost {
		return php.NewArray(), nil // PHP 8.2 fills $_POST for POST only
	}
	if len(cts) > 1 {
		// Servers keep the first, the last or join them: no one reading
		// is safe.
		return nil, unreadable("Content-Type sent more than once")
	}
	kind := formKind(cts[0])
	if len(q.Body) > maxPostSize {
		return nil, unreadable("body over post_max_size")
	}
	var f *php.Var
	if kind == "application/x-www-form-urlencoded" {
		f = php.ParsePost(string(q.Body))
	} else {
		var bad string
		if f, bad = php.ParseMultipart(q.Body, cts[0]); bad != "" {
			return nil, unreadable(bad)
		}
	}
	if f.Over() {
		return nil, unreadable(fmt.Sprintf("a form that builds more than %d arrays", php.MaxFormArrays))
	}
	return f, nil
}

// Fields returns every string value of a query, form or request source by
// its PHP name ("a[b]" for nested ones), for schemes that sign all fields.
// For the body it returns the JSON root object's scalar members as PHP
// prints them (numbers as (string) casts them, true and false as "true" and
// "false"); null, objects and arrays are left out.
func (q *Request) Fields(src Source) (map[string]string, error) {
	var root *php.Var
	switch src {
	case FromQuery:
		root = q.queryVars()
	case FromForm:
		f, err := q.Form()
		if err != nil {
			return nil, err
		}
		root = f
	case FromRequest:
		root = q.requestVars()
		if len(q.ambiguous) > 0 {
			return nil, errAmbiguousRequest
		}
	case FromBody:
		return q.bodyFields()
	default:
		return nil, fmt.Errorf("fields of %s are not supported", src)
	}
	out := map[string]string{}
	root.Each("", func(name, val string) { out[name] = val })
	return out, nil
}

func (q *Request) queryVars() *php.Var {
	if q.query == nil {
		q.query = php.ParseQuery(q.RawQuery)
	}
	return q.query
}

// requestVars is the query overlaid with the form, as PHP's array_merge
// of $_GET and $_POST (php.Overlay). A body that is not a form adds
// nothing.
func (q *Request) requestVars() *php.Var {
	if q.request != nil {
		return q.request
	}
	var form *php.Var
	if f, err := q.Form(); err == nil {
		form = f
	}
	merged, ambiguous := php.Overlay(q.queryVars(), form)
	if q.getPost {
		// array_merge($_GET, $_POST) is the one reading: a form array
		// replaces the query's, as merged holds it. Only integer names,
		// which array_merge renumbers, stay unreadable.
		ambiguous = slices.DeleteFunc(ambiguous, func(n string) bool { return !intName(n) })
		q.ambiguous = append(q.ambiguous, ambiguous...)
		q.request = merged
		return merged
	}
	q.ambiguous = append(q.ambiguous, ambiguous...)
	// PHP without request_order (its built-in default, variables_order
	// EGPCS) puts cookies in $_REQUEST too, over the query and the form:
	// a name a cookie holds is not one reading there (#33).
	q.ambiguous = append(q.ambiguous, cookieNames(q.Header)...)
	q.request = merged
	return merged
}

// intName reports whether a PHP array key is an integer one (array_merge
// renumbers those).
func intName(k string) bool {
	n, err := strconv.ParseInt(k, 10, 64)
	return err == nil && strconv.FormatInt(n, 10) == k
}

// cookieNames are the top-level PHP names of the request's cookies, as
// PHP registers them ("; "-separated, leading blanks dropped, "." and
// " " mangled to "_"), both as sent and url-decoded (PHP 7.4.11 and later
// do not decode cookie names; older ones do).
func cookieNames(h http.Header) []string {
	var out []string
	for _, v := range h.Values("Cookie") {
		for pair := range strings.SplitSeq(v, ";") {
			name, _, _ := strings.Cut(strings.TrimLeft(pair, " \t\r\n\v\f"), "=")
			for _, n := range []string{name, php.URLDecode(name)} {
				if p := php.Name(n); len(p) > 0 && p[0] != "" {
					out = append(out, p[0])
				}
			}
		}
	}
	return out
}

// errAmbiguousRequest: $_REQUEST and Bitrix's $request->get() read this
// name differently, so no one reading is the site's. PHP fills $_REQUEST
// by merging arrays of one name from the query and the form, where
// array_merge (Bitrix) takes the form's whole array; and array_merge
// renumbers integer names. Only names under such a top-level name are
// refused.
var errAmbiguousRequest = errors.New("the query and the form both hold this name as an array (or it is a number), or a cookie holds it: $_REQUEST and $request->get() differ (a site that reads request: as $request->get() does says site.request: get_post)")

// requestAmbiguous reports whether the top-level name of a FromRequest
// name is read differently by $_REQUEST and $request->get().
func (q *Request) requestAmbiguous(name string) bool {
	q.requestVars()
	if len(q.ambiguous) == 0 {
		return false
	}
	path := php.Name(name)
	return len(path) > 0 && slices.Contains(q.ambiguous, path[0])
}

func (q *Request) bodyFields() (map[string]string, error) {
	root, err := q.jsonRoot()
	if err != nil {
		return nil, err
	}
	if !root.IsObject() {
		return nil, errors.New("body is not a JSON object")
	}
	out := map[string]string{}
	var bad error
	root.ForEach(func(k, v gjson.Result) bool {
		switch v.Type {
		case gjson.String:
			out[k.Str] = v.Str
		case gjson.True:
			out[k.Str] = "true"
		case gjson.False:
			out[k.Str] = "false"
		case gjson.Number:
			n, ok := php.Number(v.Raw)
			if !ok {
				bad = errors.New("a number PHP cannot read")
				return false
			}
			out[k.Str] = n
		default:
			delete(out, k.Str) // a repeated key whose last value is no scalar
		}
		return true
	})
	return out, bad
}
