package cli

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

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
	path, err := operatorConfig(c)
	if err != nil {
		return cli.Exit(err.Error(), exitUsage)
	}
	if c.NArg() != 0 {
		return cli.Exit(usage, exitUsage)
	}
	if path == "" {
		return cli.Exit(usage+": no config file (--config, HOOKONCE_CONFIG, ./"+localConfig+" or "+host.Config+")", exitUsage)
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
	return explain(c.App.Writer, c.App.ErrWriter, ct, r, body, now)
}

// explain prints one "name: value" line each for sender, key, hash and
// signature, in the order the proxy decides them, then the route and the
// conditions that chose the sender ("tried:" lines, in file order).
func explain(out, errw io.Writer, ct *contract.Contract, r *http.Request, body []byte, now time.Time) error {
	path, rt, err := ct.Locate(r.URL.EscapedPath())
	if err != nil {
		fmt.Fprintf(out, "no sender matched %s %s\nreason: %v (hookonce answers 400)\n", r.Method, r.URL.EscapedPath(), err)
		return nil
	}
	if rt == nil {
		fmt.Fprintf(out, "no sender matched %s %s\nreason: no sender names the path %s (passed through untouched)\n", r.Method, r.URL.Path, path)
		return nil
	}
	in := ct.Inspect(rt, r, path, body, now)
	if in.BodyErr != nil {
		fmt.Fprintf(out, "no sender matched %s %s\nreason: %v (hookonce answers 400)\n", r.Method, r.URL.Path, in.BodyErr)
		fmt.Fprintf(out, "route: %s (as %s; unmatched: %s)\n", rt.Path, path, rt.Unmatched)
		return nil
	}
	route := func() {
		fmt.Fprintf(out, "route: %s (as %s; unmatched: %s)\n", rt.Path, path, rt.Unmatched)
		for _, why := range in.Choice.Why {
			fmt.Fprintf(out, "tried: %s\n", why)
		}
	}
	s := in.Choice.Sender
	if s == nil {
		fmt.Fprintf(out, "no sender matched %s %s\n", r.Method, r.URL.Path)
		route()
		return nil
	}
	if int64(len(body)) > ct.MaxBody {
		fmt.Fprintf(errw, "warning: the body is %d bytes, over max_body %d: hookonce answers 413\n", len(body), ct.MaxBody)
	}
	fmt.Fprintf(out, "sender: %s\n", s.Name)
	if in.SigErr != nil {
		// The proxy reads nothing more from a message whose signature does
		// not hold; the operator asking here still wants to know which
		// event it claims to be.
		in.Key, in.KeyErr = s.Key(in.Request)
		in.Hash, in.LegacyHash, in.HashErr = s.RequestHash(in.Request)
	}
	if in.KeyErr != nil {
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
	return nil
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
