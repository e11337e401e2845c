package contract

import (
	"bytes"
	"encoding/json"
	"sort"
	"strconv"
)

// maxChangedPaths bounds what a conflict record keeps.
const maxChangedPaths = 50

// ChangedPaths lists the dotted JSON paths whose values differ between two
// JSON bodies (array items by index), sorted; nil when either is not JSON.
// Only paths are returned, never values: they may hold customer data.
func ChangedPaths(a, b []byte) []string {
	va, ok1 := decodeJSON(a)
	vb, ok2 := decodeJSON(b)
	if !ok1 || !ok2 {
		return nil
	}
	var out []string
	diff("", va, vb, &out)
	sort.Strings(out)
	if len(out) > maxChangedPaths {
		out = out[:maxChangedPaths]
	}
	return out
}

func decodeJSON(b []byte) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil, false
	}
	return v, true
}

func join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

func diff(path string, a, b any, out *[]string) {
	if len(*out) > maxChangedPaths {
		return
	}
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			break
		}
		for k, x := range av {
			if y, ok := bv[k]; ok {
				diff(join(path, k), x, y, out)
			} else {
				*out = append(*out, join(path, k))
			}
		}
		for k := range bv {
			if _, ok := av[k]; !ok {
				*out = append(*out, join(path, k))
			}
		}
		return
	case []any:
		bv, ok := b.([]any)
		if !ok {
			break
		}
		for i := 0; i < len(av) || i < len(bv); i++ {
			p := join(path, strconv.Itoa(i))
			if i >= len(av) || i >= len(bv) {
				*out = append(*out, p)
				continue
			}
			diff(p, av[i], bv[i], out)
		}
		return
	default:
		if a == b {
			return
		}
	}
	if path == "" {
		path = "$"
	}
	*out = append(*out, path)
}
