package cli

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"go.yaml.in/yaml/v3"

	"github.com/hookonce/hookonce/contract"
)

// checkCommand validates a config file and, given a raw HTTP request,
// shows what hookonce would make of it: the tool an operator runs before
// going live.
func checkCommand() *cli.Command {
	return &cli.Command{
		Name:  "check",
		Usage: "validate a config file; with --request, show which sender, key, hash and signature verdict a raw HTTP request gets",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "config", EnvVars: []string{"HOOKONCE_CONFIG"}, Usage: "config file to validate (default: ./hookonce.yaml, else /etc/hookonce/hookonce.yaml)"},
			&cli.StringFlag{Name: "request", EnvVars: []string{"HOOKONCE_REQUEST"}, Usage: "a raw HTTP/1.1 request (request line, headers, blank line, body; CRLF or LF)"},
			&cli.StringFlag{Name: "now", EnvVars: []string{"HOOKONCE_NOW"}, Usage: "judge signature timestamps at this time (Unix seconds or RFC 3339) instead of the clock"},
		},
		Action: runCheck,
	}
}

func runCheck(c *cli.Context) error {
	const usage = "usage: hookonce check [--config FILE] [--request FILE] [--now TIME]"
	path, err := requireConfig(c, usage)
	if err != nil {
		return err
	}
	now := time.Now()
	if v := c.String("now"); v != "" {
		t, err := parseNow(v)
		if err != nil {
			return cli.Exit("--now: "+err.Error(), exitUsage)
		}
		now = t
	}
	ct, err := contract.Load(path)
	if err != nil {
		return cli.Exit(err.Error(), exitUsage)
	}
	for _, w := range ct.Warnings {
		fmt.Fprintln(c.App.ErrWriter, "warning:", w)
	}
	for _, w := range secretFileWarnings(path) {
		fmt.Fprintln(c.App.ErrWriter, "warning:", w)
	}
	reqPath := c.String("request")
	if reqPath == "" {
		names := make([]string, 0, len(ct.Senders))
		for _, s := range ct.Senders {
			names = append(names, s.Name)
		}
		fmt.Fprintf(c.App.Writer, "%s: ok, %d sender(s)", path, len(ct.Senders))
		if len(names) > 0 {
			fmt.Fprintf(c.App.Writer, ": %s", strings.Join(names, ", "))
		}
		fmt.Fprintln(c.App.Writer)
		return nil
	}
	r, body, err := readRequestFile(reqPath)
	if err != nil {
		return cli.Exit(err.Error(), exitUsage)
	}
	switch v := explain(c.App.Writer, c.App.ErrWriter, ct, r, body, now); {
	case v.status != 0:
		return cli.Exit("", exitRuntime) // a refusal: the verdict line says which
	case v.noSender:
		// Taken by no sender: the site gets it unguarded. An operator
		// checking a captured notification must not read that as a pass.
		return cli.Exit("", exitNotFound)
	}
	return nil
}

// verdict is what hookonce does with a request `check --request` judged:
// refused with status, or taken (forwarded or claimed), in words.
type verdict struct {
	status int // 0: taken
	why    string
	// noSender: taken by no sender (passed through or forwarded
	// untouched, no dedupe): `check --request` exits 3.
	noSender bool
}

func refused(status int, why string) verdict { return verdict{status: status, why: why} }
func taken(why string) verdict               { return verdict{why: why} }
func untouched(why string) verdict           { return verdict{why: why, noSender: true} }

// explain prints one "name: value" line each for sender, key, hash and
// signature, in the order the proxy decides them, then the route and the
// conditions that chose the sender ("tried:" lines, in file order), and
// last the verdict ("verdict: taken …" or "verdict: refused NNN …"). The
// verdict follows the proxy's decision table step by step
// (docs/decision-table.md); the caller exits 1 for a refusal.
func explain(out, errw io.Writer, ct *contract.Contract, r *http.Request, body []byte, now time.Time) verdict {
	v := judge(out, errw, ct, r, body, now)
	if v.status != 0 {
		fmt.Fprintf(out, "verdict: refused %d: %s\n", v.status, v.why)
	} else {
		fmt.Fprintf(out, "verdict: taken: %s\n", v.why)
	}
	return v
}

func judge(out, errw io.Writer, ct *contract.Contract, r *http.Request, body []byte, now time.Time) verdict {
	path, rt, err := ct.Locate(r.URL.EscapedPath())
	if err != nil {
		fmt.Fprintf(out, "no sender matched %s %s\nreason: %v (hookonce answers 400)\n", r.Method, r.URL.EscapedPath(), err)
		return refused(http.StatusBadRequest, "a path no site runs, or a look-alike of a sender's path")
	}
	if rt == nil {
		fmt.Fprintf(out, "no sender matched %s %s\nreason: no sender names the path %s (passed through untouched)\n", r.Method, r.URL.Path, path)
		return untouched("passed through to the site untouched (no sender names this path)")
	}
	routeLine := func() { fmt.Fprintf(out, "route: %s (as %s; %s)\n", rt.Path, path, rt.UnmatchedReason()) }
	// The candidate a request is judged under before the body decides
	// between senders (413, 400): the first whose method fits.
	first := rt.Senders[0]
	for _, s := range rt.Senders {
		if s.Methods == nil || slices.Contains(s.Methods, r.Method) {
			first = s
			break
		}
	}
	if !rt.AcceptsMethod(r.Method) && !rt.JudgesUnaccepted(r.Method) {
		fmt.Fprintf(out, "no sender matched %s %s\n", r.Method, r.URL.Path)
		routeLine()
		fmt.Fprintf(out, "tried: method %s: no sender on this path accepts it (%s)\n", r.Method, allowedText(rt))
		if rt.ForwardsUnmatched(r.Method) {
			return untouched("forwarded to the site untouched, no dedupe (no sender takes it; " + rt.UnmatchedReason() + ")")
		}
		return refused(http.StatusMethodNotAllowed, "no sender on this path accepts the method "+r.Method)
	}
	if int64(len(body)) > ct.MaxBody {
		fmt.Fprintf(errw, "warning: the body is %d bytes, over max_body %d\n", len(body), ct.MaxBody)
		if !first.Shadow() {
			return refused(http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is over max_body (%d bytes)", ct.MaxBody))
		}
	}
	in := ct.Inspect(rt, r, path, body, now)
	if in.BodyErr != nil {
		fmt.Fprintf(out, "no sender matched %s %s\nreason: %v (hookonce answers 400)\n", r.Method, r.URL.Path, in.BodyErr)
		routeLine()
		if first.Shadow() {
			return taken("forwarded untouched (shadow mode; enforced it gets 400)")
		}
		return refused(http.StatusBadRequest, "a form hookonce cannot read exactly as PHP would")
	}
	route := func() {
		routeLine()
		for _, why := range in.Choice.Why {
			fmt.Fprintf(out, "tried: %s\n", why)
		}
	}
	s := in.Choice.Sender
	if err := in.Choice.Undecided; err != nil {
		fmt.Fprintf(out, "no sender matched %s %s\nreason: %v (hookonce answers 400)\n", r.Method, r.URL.Path, err)
		route()
		if first.Shadow() {
			return taken("forwarded untouched (shadow mode; enforced it gets 400)")
		}
		if errors.Is(err, contract.ErrSignedUnmatched) {
			return refused(http.StatusBadRequest, "it verifies as a sender's delivery that the sender's match misses on a part the signature does not cover")
		}
		return refused(http.StatusBadRequest, "a match.when value could not be read as the site reads it")
	}
	if s == nil {
		fmt.Fprintf(out, "no sender matched %s %s\n", r.Method, r.URL.Path)
		route()
		if rt.ForwardsUnmatched(r.Method) {
			return untouched("forwarded to the site untouched, no dedupe (no sender takes it; " + rt.UnmatchedReason() + ")")
		}
		return refused(http.StatusForbidden, "no sender on this path takes it ("+rt.UnmatchedReason()+")")
	}
	fmt.Fprintf(out, "sender: %s\n", s.Name)
	if in.Ping != "" {
		fmt.Fprintf(out, "ping: %s\n", in.Ping)
		route()
		if s.Shadow() {
			return taken("forwarded untouched (shadow mode; enforced hookonce answers it 200 itself)")
		}
		return taken("answered 200 by hookonce itself; the site never sees it")
	}
	if in.SigErr != nil {
		// The proxy reads nothing more from a message whose signature does
		// not hold; the operator asking here still wants to know which
		// event it claims to be.
		in.Key, in.KeyErr = s.Key(in.Request)
		in.Hash, in.LegacyHash, in.HashErr = s.RequestHash(in.Request)
	}
	if in.Passthrough != "" {
		fmt.Fprintf(out, "dedupe: none for this delivery, forwarded to the site as it is (%s)\n", in.Passthrough)
	}
	if in.Passthrough != "" && len(s.Keys) == 0 {
		// A sender without a key (dedupe: off, bitrix24): no key to show.
	} else if in.KeyErr != nil {
		policy := "missing_key: " + string(s.MissingKey)
		if s.Forwardable(in.KeyErr, in.Request) && s.PassesUnkeyed(in.Request) {
			policy = "a " + s.Preset + " message without an event id: passed to the site without dedupe"
		}
		fmt.Fprintf(out, "key: missing: %s (%s)\n", strings.TrimPrefix(in.KeyErr.Error(), contract.ErrMissingKey.Error()+": "), policy)
	} else {
		fmt.Fprintf(out, "key: %s\n", in.Key)
	}
	if in.HashErr != nil {
		fmt.Fprintf(out, "hash: error: %v\n", in.HashErr)
	} else {
		fmt.Fprintf(out, "hash: sha256:%s\n", in.Hash)
	}
	if ser := s.Serialize; ser != nil {
		if in.Object != "" {
			fmt.Fprintf(out, "serialize: scope %s, object %s (one delivery about it at the site at a time; waits up to %s)\n", ser.Scope, in.Object, ser.Wait)
		} else if in.SigErr == nil && contract.KeyUnreadable(in.ObjectErr) {
			fmt.Fprintf(out, "serialize: scope %s, object unreadable: %v (refused with 400; in shadow mode runs unserialized)\n", ser.Scope, in.ObjectErr)
		} else if in.SigErr == nil {
			fmt.Fprintf(out, "serialize: scope %s, no object: %v (runs unserialized)\n", ser.Scope, in.ObjectErr)
		}
	}
	switch {
	case !s.HasSignature():
		fmt.Fprintln(out, "signature: none")
	case in.SigErr != nil:
		fmt.Fprintf(out, "signature: invalid: %v\n", in.SigErr)
	default:
		fmt.Fprintln(out, "signature: valid")
	}
	route()
	switch {
	case in.SigErr != nil && s.Shadow():
		return taken("forwarded untouched (shadow mode; enforced it gets 401)")
	case in.SigErr != nil:
		return refused(http.StatusUnauthorized, "the signature does not hold")
	case in.Passthrough != "":
		return taken("forwarded to the site without dedupe (" + in.Passthrough + ")")
	case in.Unkeyed() != nil && s.Forwardable(in.Unkeyed(), in.Request):
		return taken("forwarded to the site without dedupe (no event id)")
	case in.Unkeyed() != nil:
		return refused(http.StatusBadRequest, "no usable event id")
	case s.Serialize != nil && contract.KeyUnreadable(in.ObjectErr) && !s.Shadow():
		return refused(http.StatusBadRequest, "the serialize key cannot be read as the site reads it")
	case s.Shadow():
		return taken("claimed as " + s.Name + ":" + in.Key + " in shadow mode (forwarded whatever the store says)")
	}
	return taken("claimed as " + s.Name + ":" + in.Key + " (new: forwarded once; a repeat gets the stored answer)")
}

// allowedText names the methods some sender on rt accepts.
func allowedText(rt *contract.Route) string {
	a := rt.Allowed()
	if a == nil {
		return "any method"
	}
	return "accepted: " + strings.Join(a, ", ")
}

func parseNow(v string) (time.Time, error) {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return time.Unix(n, 0), nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q: want Unix seconds or RFC 3339", v)
	}
	return t, nil
}

// readRequestFile parses a raw HTTP/1.1 request as saved from a capture or
// typed by hand. Header lines may end in LF alone. The body is the bytes
// after the blank line: cut to Content-Length when the file has more (an
// editor's trailing newline), decoded when chunked, taken whole when no
// length is given.
func readRequestFile(path string) (*http.Request, []byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read request: %w", err)
	}
	data = bytes.TrimLeft(data, "\r\n")
	head, rest := data, []byte(nil)
	if i := headerEnd(data); i >= 0 {
		head = data[:i]
		rest = data[i:]
		rest = rest[bytes.IndexByte(rest, '\n')+1:] // end of the last header line
		rest = rest[bytes.IndexByte(rest, '\n')+1:] // the blank line
	}
	norm := bytes.ReplaceAll(bytes.ReplaceAll(head, []byte("\r\n"), []byte("\n")), []byte("\n"), []byte("\r\n"))
	norm = append(norm, "\r\n\r\n"...)
	r, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(norm)))
	if err != nil {
		return nil, nil, fmt.Errorf("request %s: not an HTTP/1.1 request: %v", path, err)
	}
	if slices.Contains(r.TransferEncoding, "chunked") {
		full, err := http.ReadRequest(bufio.NewReader(io.MultiReader(bytes.NewReader(norm), bytes.NewReader(rest))))
		if err != nil {
			return nil, nil, fmt.Errorf("request %s: %v", path, err)
		}
		body, err := io.ReadAll(full.Body)
		if err != nil {
			return nil, nil, fmt.Errorf("request %s: chunked body: %v", path, err)
		}
		return full, body, nil
	}
	body := rest
	if r.ContentLength >= 0 && r.Header.Get("Content-Length") != "" {
		if int64(len(rest)) < r.ContentLength {
			return nil, nil, fmt.Errorf("request %s: the body is %d bytes, shorter than its Content-Length %d", path, len(rest), r.ContentLength)
		}
		body = rest[:r.ContentLength]
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	return r, body, nil
}

// headerEnd returns the index of the first line break of the blank line
// ending the headers ("\r\n\r\n" or "\n\n", mixed too), or -1.
func headerEnd(data []byte) int {
	for i := 0; i < len(data); i++ {
		if data[i] != '\n' {
			continue
		}
		j := i + 1
		if j < len(data) && data[j] == '\r' {
			j++
		}
		if j < len(data) && data[j] == '\n' {
			// Back up over the \r of this line ending, if any.
			if i > 0 && data[i-1] == '\r' {
				return i - 1
			}
			return i
		}
	}
	return -1
}

// secretFileWarnings names each secret file the config at path reads
// (every secret_file-like setting: secret_file, previous_secret_file, …)
// that others on the host may read (world-readable) or change
// (group- or world-writable): anyone who reads a secret can sign a
// notification hookonce and the site will take for the provider's. Files
// that cannot be found are the config's errors, not warnings here.
func secretFileWarnings(path string) []string {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var root yaml.Node
	if yaml.Unmarshal(data, &root) != nil {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				if strings.Contains(k.Value, "secret_file") {
					files := []*yaml.Node{v}
					if v.Kind == yaml.SequenceNode {
						files = v.Content
					}
					for _, f := range files {
						if f.Kind != yaml.ScalarNode || f.Value == "" {
							continue
						}
						p := f.Value
						if !filepath.IsAbs(p) {
							p = filepath.Join(filepath.Dir(path), p)
						}
						if seen[p] {
							continue
						}
						seen[p] = true
						if w := secretModeWarning(p); w != "" {
							out = append(out, fmt.Sprintf("%s:%d: field %s: %s", path, f.Line, k.Value, w))
						}
					}
					continue
				}
				walk(v)
			}
			return
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(&root)
	return out
}

// secretModeWarning says what is wrong with a secret file's mode, or "".
func secretModeWarning(p string) string {
	fi, err := os.Stat(p)
	if err != nil {
		return ""
	}
	mode := fi.Mode().Perm()
	var what []string
	if mode&0o004 != 0 {
		what = append(what, "readable by every user on the host")
	}
	if mode&0o022 != 0 {
		what = append(what, "writable by others than its owner")
	}
	if len(what) == 0 {
		return ""
	}
	return fmt.Sprintf("the secret file %s (mode %04o) is %s: anyone who reads it can sign notifications the site will take for the provider's; chmod 0600 (or 0640 with a group only hookonce is in)",
		p, mode, strings.Join(what, " and "))
}
