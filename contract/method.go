// The methods a route's senders accept.

package contract

import (
	"slices"
	"sort"
	"strings"
)

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
