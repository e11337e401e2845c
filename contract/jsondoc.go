package contract

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/hookonce/hookonce/contract/internal/php"
	"github.com/tidwall/gjson"
)

// jsonRoot returns the body as a parsed gjson value over the body's own
// bytes (no copy: a Request's Body never changes), or errNotJSON.
func (q *Request) jsonRoot() (gjson.Result, error) {
	if !q.jsonDone {
		q.jsonDone = true
		if !php.ValidJSON(q.Body) {
			q.jsonErr = errNotJSON
		}
	}
	if q.jsonErr != nil {
		return gjson.Result{}, q.jsonErr
	}
	return gjson.Parse(bodyString(q.Body)), nil
}

func bodyString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// bodyPath returns the value at a gjson path in the body as PHP's
// json_decode reads it: a plain dotted path ("data.order.id", "items.0",
// "a\.b") is walked member by member, the last of repeated keys winning;
// any other gjson syntax (wildcards, queries, modifiers) is answered on a
// canonical copy of the document, in which repeated keys are resolved.
func (q *Request) bodyPath(path string) (gjson.Result, error) {
	root, err := q.jsonRoot()
	if err != nil {
		return root, err
	}
	segs, ok := plainPath(path)
	if !ok {
		if q.canon == nil {
			if q.canon, err = CanonicalJSON(q.Body, nil); err != nil {
				return gjson.Result{}, errNotJSON
			}
		}
		return gjson.GetBytes(q.canon, path), nil
	}
	cur := root
	for _, seg := range segs {
		var next gjson.Result
		switch {
		case cur.IsObject():
			cur.ForEach(func(k, v gjson.Result) bool {
				if k.Str == seg {
					next = v // keep going: the last one wins
				}
				return true
			})
		case cur.IsArray():
			n, err := strconv.Atoi(seg)
			if err != nil || n < 0 || strconv.Itoa(n) != seg {
				return gjson.Result{}, nil
			}
			i := 0
			cur.ForEach(func(_, v gjson.Result) bool {
				if i == n {
					next = v
					return false
				}
				i++
				return true
			})
		}
		if !next.Exists() {
			return gjson.Result{}, nil
		}
		cur = next
	}
	return cur, nil
}

// plainPath splits a gjson path that uses no syntax but dots and
// backslash escapes into its segments.
func plainPath(path string) ([]string, bool) {
	if path == "" || strings.HasPrefix(path, "..") {
		return nil, false
	}
	var segs []string
	var b strings.Builder
	for i := 0; i < len(path); i++ {
		c := path[i]
		switch {
		case c == '\\' && i+1 < len(path):
			i++
			b.WriteByte(path[i])
		case c == '.':
			segs = append(segs, b.String())
			b.Reset()
		case strings.IndexByte("*?#@|!{}[]()=<>%~", c) >= 0:
			return nil, false
		default:
			b.WriteByte(c)
		}
	}
	segs = append(segs, b.String())
	if slices.Contains(segs, "") {
		return nil, false
	}
	return segs, true
}

// CanonicalJSON re-encodes a JSON document with sorted object keys (the
// last of repeated keys kept), no insignificant whitespace, strings as Go's
// encoder writes them (HTML not escaped) and numbers exactly as written,
// after removing the dotted paths in ignore (a.b.c; a missing path is not
// an error). It walks the document where it lies: memory grows with the
// widest object, not with the document. The output is byte for byte what
// decoding into maps and encoding them gave, so stored payload hashes
// (hash: json) keep matching.
func CanonicalJSON(body []byte, ignore []string) ([]byte, error) {
	var out bytes.Buffer
	if err := writeCanonicalJSON(&out, body, ignore); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// writeCanonicalJSON writes CanonicalJSON's output to w (a hash, to
// compare payloads without holding their canonical copy).
func writeCanonicalJSON(w io.Writer, body []byte, ignore []string) error {
	trimmed := bytes.TrimSpace(body)
	if !gjson.ValidBytes(trimmed) {
		if dec := json.NewDecoder(bytes.NewReader(trimmed)); dec.Decode(new(json.RawMessage)) == nil {
			return errors.New("hash json: trailing data after the JSON document")
		}
		return fmt.Errorf("hash json: body is not JSON: %w", errNotJSON)
	}
	var paths [][]string
	for _, p := range ignore {
		paths = append(paths, strings.Split(p, "."))
	}
	c := canonWriter{out: bufio.NewWriterSize(w, 4<<10)}
	c.enc = json.NewEncoder(&c.str)
	c.enc.SetEscapeHTML(false)
	if err := c.value(gjson.Parse(bodyString(trimmed)), paths); err != nil {
		return err
	}
	return c.out.Flush()
}

type canonWriter struct {
	out *bufio.Writer
	str bytes.Buffer // scratch for one encoded string
	enc *json.Encoder
}

type canonMember struct {
	key     string
	val     gjson.Result
	removed bool // by an ignore path
}

func (c *canonWriter) value(v gjson.Result, ignore [][]string) error {
	switch v.Type {
	case gjson.String:
		return c.string(v.Str)
	case gjson.Number:
		c.out.WriteString(v.Raw)
	case gjson.True:
		c.out.WriteString("true")
	case gjson.False:
		c.out.WriteString("false")
	case gjson.Null:
		c.out.WriteString("null")
	default:
		if v.IsArray() {
			c.out.WriteByte('[')
			first, err := true, error(nil)
			v.ForEach(func(_, e gjson.Result) bool {
				if !first {
					c.out.WriteByte(',')
				}
				first = false
				err = c.value(e, nil) // ignore paths never descend into arrays
				return err == nil
			})
			c.out.WriteByte(']')
			return err
		}
		return c.object(v, ignore)
	}
	return nil
}

func (c *canonWriter) object(v gjson.Result, ignore [][]string) error {
	var ms []canonMember
	idx := map[string]int{}
	v.ForEach(func(k, e gjson.Result) bool {
		if i, ok := idx[k.Str]; ok {
			ms[i].val = e // the last of repeated keys, in the first's place
			return true
		}
		idx[k.Str] = len(ms)
		ms = append(ms, canonMember{key: k.Str, val: e})
		return true
	})
	// A one-segment ignore path removes the member; a longer one goes on
	// into the member's value.
	var sub map[string][][]string
	for _, p := range ignore {
		if len(p) == 1 {
			if i, ok := idx[p[0]]; ok {
				ms[i].removed = true
			}
			continue
		}
		if sub == nil {
			sub = map[string][][]string{}
		}
		sub[p[0]] = append(sub[p[0]], p[1:])
	}
	slices.SortFunc(ms, func(a, b canonMember) int { return strings.Compare(a.key, b.key) })
	c.out.WriteByte('{')
	first := true
	for _, m := range ms {
		if m.removed {
			continue
		}
		if !first {
			c.out.WriteByte(',')
		}
		first = false
		if err := c.string(m.key); err != nil {
			return err
		}
		c.out.WriteByte(':')
		if err := c.value(m.val, sub[m.key]); err != nil {
			return err
		}
	}
	c.out.WriteByte('}')
	return nil
}

func (c *canonWriter) string(s string) error {
	c.str.Reset()
	if err := c.enc.Encode(s); err != nil {
		return fmt.Errorf("hash json: %w", err)
	}
	c.out.Write(bytes.TrimSuffix(c.str.Bytes(), []byte("\n")))
	return nil
}
