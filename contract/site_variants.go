// Site variants: the router finds a normalised path's route by map lookups
// only, the exact path, the script a PATH_INFO path runs, and the aliases
// the site's index, extension and MultiViews rules (site:) give a sender's
// path; and it refuses the look-alikes.

package contract

import (
	"cmp"
	"slices"
	"sort"
	"strings"
)

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
	r.addSender(s)
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
