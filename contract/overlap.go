// The check's warnings about matching: paths whose spellings run one
// script (conflicts), and senders an earlier one on the path always takes
// (overlaps).

package contract

import (
	"fmt"
	"slices"
)

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
