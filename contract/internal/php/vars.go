// Package php reads request data as PHP 8.2 does: query strings and
// urlencoded bodies into $_GET and $_POST (names mangled, brackets nested,
// max_input_vars and max_input_nesting_level), multipart/form-data bodies,
// $_REQUEST's overlay, JSON as json_decode accepts it and numbers as PHP
// prints them. Its tests hold it against the php binary itself.
package php

import (
	"iter"
	"maps"
	"math"
	"strconv"
	"strings"
)

// PHP reads a query string or an urlencoded body into nested arrays with
// rules of its own, and a site written in PHP sees only what those rules
// produce. hookonce reads ids and conditions the same way, or a delivery
// that PHP reads as one event could be two to hookonce (trap 20 in
// ARCHITECTURE.md):
//
//   - pairs are split on "&" only; a pair without "=" is an empty value;
//   - names and values are URL-decoded ("+" is a space); a name is cut at
//     its first NUL, leading spaces are dropped, an empty name is skipped;
//   - in the top-level name, "." and " " become "_" (and a "[" with no "]"
//     after it becomes "_" too); "a[b][c]" addresses nested arrays, "a[]"
//     appends, and so does an index of exactly one whitespace byte ("a[ ]",
//     "a[\t]"; two spaces or " x" are keys as written); anything after a
//     "]" that is not "[" is ignored;
//   - a repeated name keeps its last value, and a later plain value
//     replaces an array (and the other way round);
//   - at most maxInputVars pairs are read (PHP's max_input_vars), and at
//     most maxInputNesting levels of brackets (max_input_nesting_level).
//     The query string and an urlencoded POST body count differently:
//     the query (php_default_treat_data) skips empty pairs and registers at
//     most 1000; the body (add_post_vars) counts every pair, empty ones
//     ("a=1&&b=2", a leading "&") included, and registers the 1001st before
//     it stops. ParseQuery is the first, ParsePost the second.
const (
	maxInputVars    = 1000
	maxInputNesting = 64
)

// Var is one value as PHP holds it: a string, or an array of named
// elements.
type Var struct {
	str  string
	arr  map[string]*Var // nil for a string
	next int64           // the index "a[]" appends at
	full bool            // PHP_INT_MAX is taken: "a[]" appends nothing
	// On the root only: how many arrays registering has built, and
	// whether it stopped at MaxFormArrays.
	arrays int
	over   bool
}

// MaxFormArrays bounds the arrays one query or form may build. PHP's own
// limits allow 1000 fields nested 64 deep — 64,000 arrays, tens of
// megabytes, from a 133 KB body anyone can send before any signature is
// checked (trap 30 in ARCHITECTURE.md). No webhook comes near: Bitrix24's
// richest events build a few dozen. A form past it is refused
// (Request.Unreadable), never read in part.
const MaxFormArrays = 4096

func NewArray() *Var { return &Var{arr: map[string]*Var{}} }

// ParseQuery reads "a=1&b[c]=2" the way PHP fills $_GET and $_POST.
func ParseQuery(s string) *Var {
	root := NewArray()
	n := 0
	for pair := range strings.SplitSeq(s, "&") {
		if pair == "" {
			continue
		}
		if n++; n > maxInputVars {
			break
		}
		name, val, _ := strings.Cut(pair, "=")
		root.register(URLDecode(name), URLDecode(val))
	}
	return root
}

// ParsePost reads an urlencoded POST body the way PHP fills $_POST
// (main/php_variables.c, add_post_vars): every "&"-separated pair counts
// toward max_input_vars, empty ones too, except an empty piece after a
// trailing "&"; the pair that passes the limit is still registered, then
// reading stops.
func ParsePost(s string) *Var {
	root := NewArray()
	if s == "" {
		return root
	}
	s = strings.TrimSuffix(s, "&")
	n := 0
	for pair := range strings.SplitSeq(s, "&") {
		name, val, _ := strings.Cut(pair, "=")
		root.register(URLDecode(name), URLDecode(val))
		if n++; n > maxInputVars {
			break
		}
	}
	return root
}

// URLDecode is PHP's urldecode: "+" is a space, a malformed "%" is kept
// as it is.
func URLDecode(s string) string {
	if !strings.ContainsAny(s, "+%") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '+':
			b.WriteByte(' ')
		case c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// isCSpace is C's isspace in the C locale.
func isCSpace(c byte) bool {
	return c == ' ' || '\t' <= c && c <= '\r'
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	default:
		return c - 'a' + 10
	}
}

// Name splits a variable name into the path PHP stores it under:
// "data[FIELDS][ID]" → [data FIELDS ID]; appendIndex marks "a[]".
func Name(name string) []string {
	if i := strings.IndexByte(name, 0); i >= 0 {
		name = name[:i]
	}
	name = strings.TrimLeft(name, " ")
	var top strings.Builder
	rest := ""
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c == '[' {
			if strings.IndexByte(name[i+1:], ']') >= 0 {
				rest = name[i:]
				break
			}
			// No closing bracket: not an index. PHP keeps the rest as part
			// of the name, with " ", "." and "[" turned into "_".
			top.WriteByte('_')
			for _, r := range []byte(name[i+1:]) {
				if r == ' ' || r == '.' || r == '[' {
					r = '_'
				}
				top.WriteByte(r)
			}
			break
		}
		if c == ' ' || c == '.' {
			c = '_'
		}
		top.WriteByte(c)
	}
	if top.Len() == 0 {
		return nil
	}
	path := []string{top.String()}
	// Each "[index]" nests one level; an unterminated one, or anything
	// after a "]" other than "[", ends the name there.
	for strings.HasPrefix(rest, "[") {
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			break
		}
		idx := rest[1:end]
		if idx == "" || len(idx) == 1 && isCSpace(idx[0]) {
			idx = appendIndex
		}
		path = append(path, idx)
		rest = rest[end+1:]
	}
	if len(path) > maxInputNesting+1 {
		return nil // PHP drops a variable nested deeper than the limit
	}
	return path
}

// appendIndex stands for "[]" in a parsed name. It cannot be a real index:
// PHP cuts names at NUL.
const appendIndex = "\x00"

func (v *Var) register(name, val string) {
	if v.over {
		return
	}
	path := Name(name)
	if path == nil {
		return
	}
	cur := v
	for i, seg := range path {
		if seg == appendIndex {
			if cur.full {
				return
			}
			seg = strconv.FormatInt(cur.next, 10)
		}
		if i == len(path)-1 {
			cur.set(seg, &Var{str: val})
			return
		}
		child := cur.arr[seg]
		if child == nil || child.arr == nil {
			if v.arrays++; v.arrays > MaxFormArrays {
				v.over = true
				return
			}
			child = NewArray()
			cur.set(seg, child)
		}
		cur = child
	}
}

// set stores an element and moves the append index past an integer key,
// as PHP's next free element does.
func (v *Var) set(key string, val *Var) {
	v.arr[key] = val
	if n, err := strconv.ParseInt(key, 10, 64); err == nil && strconv.FormatInt(n, 10) == key && n >= v.next {
		if n == math.MaxInt64 {
			v.full = true
		} else {
			v.next = n + 1
		}
	}
}

// lookup returns the string at a PHP name such as "data[FIELDS][ID]"; ok is
// false when it is absent or an array.
func (v *Var) Lookup(name string) (string, bool) {
	path := Name(name)
	if path == nil {
		return "", false
	}
	cur := v
	for _, seg := range path {
		if cur.arr == nil {
			return "", false
		}
		if cur = cur.arr[seg]; cur == nil {
			return "", false
		}
	}
	if cur.arr != nil {
		return "", false
	}
	return cur.str, true
}

// IsArray reports whether the PHP name holds an array (which Lookup
// reports as absent).
func (v *Var) IsArray(name string) bool {
	path := Name(name)
	cur := v
	for _, seg := range path {
		if cur.arr == nil {
			return false
		}
		if cur = cur.arr[seg]; cur == nil {
			return false
		}
	}
	return path != nil && cur.arr != nil
}

// each calls fn for every string element at the top level, in no order;
// arrays are flattened to their PHP names ("a[b]").
func (v *Var) Each(prefix string, fn func(name, val string)) {
	for k, e := range v.arr {
		name := k
		if prefix != "" {
			name = prefix + "[" + k + "]"
		}
		if e.arr != nil {
			e.Each(name, fn)
			continue
		}
		fn(name, e.str)
	}
}

// Number turns a JSON number into the text a PHP script gets from
// (string)json_decode(...): integers that fit in 64 bits as written without
// a sign on zero, everything else as a double printed with precision 14.
// "1", "1.0", "1e0" and "10E-1" are all "1" to PHP, so they are one key.
func Number(raw string) (string, bool) {
	if !strings.ContainsAny(raw, ".eE") {
		if n, err := strconv.ParseInt(raw, 10, 64); err == nil {
			return strconv.FormatInt(n, 10), true
		}
	}
	f, err := strconv.ParseFloat(raw, 64)
	if err != nil && !isRangeErr(err) {
		return "", false
	}
	return phpFloat(f), true
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// phpFloat is PHP's float-to-string with precision=14 (zend_gcvt): fixed
// notation for exponents -4…14, else d.dddE+X, with ".0" when there is a
// single digit.
func phpFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "INF"
	case math.IsInf(f, -1):
		return "-INF"
	case math.IsNaN(f):
		return "NAN"
	case f == 0:
		if math.Signbit(f) {
			return "-0"
		}
		return "0"
	}
	// 14 significant digits, trailing zeros dropped.
	e := strconv.FormatFloat(f, 'e', 13, 64) // d.ddddddddddddde±XX
	mant, expStr, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expStr)
	neg := strings.HasPrefix(mant, "-")
	mant = strings.TrimPrefix(mant, "-")
	digits := strings.TrimRight(strings.Replace(mant, ".", "", 1), "0")
	if digits == "" {
		digits = "0"
	}
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	decpt := exp + 1 // digits before the decimal point
	switch {
	case decpt < -3 || decpt > 14:
		b.WriteByte(digits[0])
		b.WriteByte('.')
		if len(digits) > 1 {
			b.WriteString(digits[1:])
		} else {
			b.WriteByte('0')
		}
		b.WriteByte('E')
		if exp >= 0 {
			b.WriteByte('+')
		} else {
			b.WriteByte('-')
			exp = -exp
		}
		b.WriteString(strconv.Itoa(exp))
	case decpt <= 0:
		b.WriteString("0.")
		b.WriteString(strings.Repeat("0", -decpt))
		b.WriteString(digits)
	case len(digits) <= decpt:
		b.WriteString(digits)
		b.WriteString(strings.Repeat("0", decpt-len(digits)))
	default:
		b.WriteString(digits[:decpt])
		b.WriteByte('.')
		b.WriteString(digits[decpt:])
	}
	return b.String()
}

// Over reports whether registering stopped at MaxFormArrays (on a root).
func (v *Var) Over() bool { return v.over }

// Names are the names of an array's elements (none for a string), in no
// particular order.
func (v *Var) Names() iter.Seq[string] { return maps.Keys(v.arr) }

// Overlay is query overlaid with form (nil: a body that is not a form), as
// PHP's array_merge of $_GET and $_POST: a top-level form name replaces the
// query's whole entry of that name. ambiguous lists the top-level names
// that $_REQUEST and an array_merge read differently: integer names
// (array_merge renumbers them) and names both hold as arrays ($_REQUEST
// merges those, array_merge takes the form's).
func Overlay(query, form *Var) (merged *Var, ambiguous []string) {
	merged = NewArray()
	for k, v := range query.arr {
		merged.arr[k] = v
		if isInt(k) {
			ambiguous = append(ambiguous, k)
		}
	}
	if form != nil {
		for k, v := range form.arr {
			if old := merged.arr[k]; old != nil && old.arr != nil && v.arr != nil {
				ambiguous = append(ambiguous, k)
			} else if isInt(k) {
				ambiguous = append(ambiguous, k)
			}
			merged.arr[k] = v
		}
	}
	return merged, ambiguous
}

func isInt(k string) bool {
	n, err := strconv.ParseInt(k, 10, 64)
	return err == nil && strconv.FormatInt(n, 10) == k
}

// Plain is v as json_encode(…, JSON_FORCE_OBJECT) gives PHP's array: a
// string, or a map of the elements' Plain values.
func Plain(v *Var) any {
	if v.arr == nil {
		return v.str
	}
	m := make(map[string]any, len(v.arr))
	for k, e := range v.arr {
		m[k] = Plain(e)
	}
	return m
}
