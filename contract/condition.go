// match.when conditions: compiled from the file, judged true, false or
// unreadable against a request read as the site reads it (trap 36).

package contract

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"unicode"
)

// ErrConditionUnreadable is wrapped by Choice.Undecided when a
// match.when value could not be read as the site reads it (a header sent
// twice or under two spellings CGI merges, a request: name a cookie also
// holds, a value with control characters, a JSON object where a string
// is tested): the site reads something hookonce cannot determine, so the
// request is neither a sender's nor "no sender's" (trap 36).
var ErrConditionUnreadable = errors.New("a match.when value cannot be read as the site reads it")

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
