// The path rule: the path a site behind nginx or Apache runs for a request
// (NormalizePath, trap 19), and the fold a case-insensitive or Windows file
// system applies to it (look-alike paths).

package contract

import (
	"errors"
	"net/url"
	"strings"
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
