package contract

import (
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
)

// Config errors in the operator's words: the YAML decoder speaks of Go
// types ("field presett not found in type contract.senderFile", "cannot
// unmarshal !!str `x` into int"); these turn its messages into what the
// file says, with a "did you mean" for a misspelt name.

var (
	yamlUnknownField = regexp.MustCompile(`^field (\S+) not found in type (\S+)$`)
	yamlCannot       = regexp.MustCompile("^cannot unmarshal !!(\\w+) `(?:[^`]*)` into (\\S+)$")
)

// userWordsName rewrites one message of the YAML decoder (without its
// "line N: " prefix) for the operator, and returns the unknown setting's
// name when that is what msg is about; messages it does not know pass as
// they are, minus any Go package name.
func userWordsName(msg string) (string, string) {
	if m := yamlUnknownField.FindStringSubmatch(msg); m != nil {
		name, typ := m[1], m[2]
		known := yamlFieldsOf(typ)
		out := fmt.Sprintf("unknown setting %q", name)
		if s := suggest(name, known); s != "" {
			return out + fmt.Sprintf(" (did you mean %q?)", s), name
		}
		if len(known) > 0 {
			return out + " (known here: " + strings.Join(known, ", ") + ")", name
		}
		return out, name
	}
	if m := yamlCannot.FindStringSubmatch(msg); m != nil {
		// The value is not quoted: a secret written in the wrong place
		// must not reach a log.
		return fmt.Sprintf("want %s, not %s", goTypeWords(m[2]), yamlTagWords(m[1])), ""
	}
	return strings.ReplaceAll(msg, "contract.", ""), ""
}

func yamlTagWords(tag string) string {
	switch tag {
	case "str":
		return "a string"
	case "int", "float":
		return "a number"
	case "bool":
		return "true or false"
	case "seq":
		return "a list"
	case "map":
		return "a mapping (name: value)"
	case "null":
		return "nothing"
	}
	return "a " + tag
}

// goTypeWords names what a Go type the decoder wanted looks like in YAML.
func goTypeWords(typ string) string {
	typ = strings.TrimLeft(typ, "*")
	switch {
	case strings.HasPrefix(typ, "[]string"):
		return "a list of strings, such as [a, b]"
	case strings.HasPrefix(typ, "[]"):
		return "a list, such as [ { … }, { … } ]"
	case strings.HasPrefix(typ, "map["):
		return "a mapping (name: value)"
	}
	switch typ {
	case "bool":
		return "true or false"
	case "string":
		return "a string"
	case "int", "int64", "uint", "float64":
		return "a number"
	}
	return "a mapping (name: value)"
}

// suggest returns the known name nearest to name when it is at most two
// edits away (and closer than to any other), else "".
func suggest(name string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		d := levenshtein(strings.ToLower(name), strings.ToLower(k))
		if d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// didYouMean is " (did you mean "x"?)" for a near name, else "".
func didYouMean(name string, known []string) string {
	if s := suggest(name, known); s != "" && s != name {
		return fmt.Sprintf(" (did you mean %q?)", s)
	}
	return ""
}

func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

var (
	fieldsOnce sync.Once
	fieldsByGo map[string][]string // Go type name → its YAML setting names
)

// yamlFieldsOf lists the settings a mapping of Go type typ (as the
// decoder names it: "contract.senderFile") takes, sorted; nil when unknown.
func yamlFieldsOf(typ string) []string {
	fieldsOnce.Do(func() {
		fieldsByGo = map[string][]string{}
		collectFields(reflect.TypeOf(file{}))
	})
	return fieldsByGo[typ]
}

// collectFields records the YAML names of struct type t (inline structs
// flattened) and of every struct type reachable from it.
func collectFields(t reflect.Type) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return
	}
	if _, done := fieldsByGo[t.String()]; done {
		return
	}
	fieldsByGo[t.String()] = nil // being collected
	var names []string
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag := f.Tag.Get("yaml")
			name, opts, _ := strings.Cut(tag, ",")
			if strings.Contains(opts, "inline") {
				walk(f.Type)
				continue
			}
			if name == "-" || !f.IsExported() && tag == "" {
				continue
			}
			if name == "" {
				name = strings.ToLower(f.Name)
			}
			names = append(names, name)
			collectFields(f.Type)
		}
	}
	walk(t)
	sort.Strings(names)
	fieldsByGo[t.String()] = names
}

// placeProblem gives a decoder's problem (which knows only its line) the
// sender and the field it is about, found in the file's node tree: the
// key named name on that line (an unknown setting), else the deepest key
// on it whose value is a single value.
func placeProblem(top *yaml.Node, p *Problem, name string) {
	if top == nil || p.Line == 0 {
		return
	}
	type hit struct {
		sender, field string
		depth         int
		scalar        bool
	}
	var best *hit
	var walk func(n *yaml.Node, sender, field string, depth int)
	walk = func(n *yaml.Node, sender, field string, depth int) {
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				f := k.Value
				if field != "" {
					f = field + "." + k.Value
				}
				if k.Line == p.Line || v.Line == p.Line {
					h := &hit{sender, f, depth, v.Kind == yaml.ScalarNode}
					switch {
					case name != "" && k.Value == name && k.Line == p.Line:
						best = h
						return
					case name == "" && (best == nil || h.scalar && !best.scalar || h.scalar == best.scalar && h.depth > best.depth):
						best = h
					}
				}
				walk(v, sender, f, depth+1)
			}
		case yaml.SequenceNode:
			for i, item := range n.Content {
				s, f := sender, fmt.Sprintf("%s[%d]", field, i)
				if field == "senders" {
					s, f = fmt.Sprintf("#%d", i+1), ""
					if nm := lookupNode(item, "name"); nm != nil && nm.Kind == yaml.ScalarNode && nm.Value != "" {
						s = nm.Value
					}
				}
				walk(item, s, f, depth+1)
			}
		}
	}
	walk(top, "", "", 0)
	if best != nil {
		p.Sender, p.Field = best.sender, best.field
	}
}
