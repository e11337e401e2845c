package contract

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Compilation: the decoded file (schema.go) checked and turned into an
// immutable Contract, presets and defaults applied, every problem reported
// at once with file, line, sender and field.

var yamlLine = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)

// Parse validates a config file's bytes; name is used in messages.
func Parse(data []byte, name string) (*Contract, error) { return ParseEnv(data, name, os.LookupEnv) }

// ParseEnv is Parse with secret_env looked up through env.
func ParseEnv(data []byte, name string, env LookupEnv) (*Contract, error) {
	e := &Error{File: name}
	var f file
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		var te *yaml.TypeError
		msgs := []string{err.Error()}
		if errors.As(err, &te) {
			msgs = te.Errors
		}
		var root yaml.Node
		var top *yaml.Node
		if yaml.Unmarshal(data, &root) == nil && root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
			top = root.Content[0]
		}
		for _, msg := range msgs {
			p, name := yamlProblem(msg)
			placeProblem(top, &p, name)
			e.Problems = append(e.Problems, p)
		}
		return nil, e
	}
	// The node tree gives the messages below their line numbers.
	var root yaml.Node
	var top *yaml.Node
	if yaml.Unmarshal(data, &root) == nil && root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		top = root.Content[0]
		if list := lookupNode(top, "senders"); list != nil && list.Kind == yaml.SequenceNode {
			for i, item := range list.Content {
				if i < len(f.Senders) {
					f.Senders[i].node = item
				}
			}
		}
	}

	c := &Contract{File: name, Listen: f.Listen, Upstream: f.Upstream, MaxBody: DefaultMaxBody, MaxInflight: DefaultMaxInflight, BodyTimeout: DefaultBodyTimeout}
	c.Site = compileSite(f.Site, top, e)
	c.router = newRouter(c.Site)
	for _, tp := range f.TrustedProxies {
		pfx, err := netip.ParsePrefix(tp)
		if err != nil {
			addr, aerr := netip.ParseAddr(tp)
			if aerr != nil {
				e.add(Problem{Line: fieldLine(top, "trusted_proxies"), Field: "trusted_proxies", Msg: fmt.Sprintf("%q: want an IP address or a CIDR such as 10.0.0.0/8", tp)})
				continue
			}
			pfx = netip.PrefixFrom(addr, addr.BitLen())
		}
		c.TrustedProxies = append(c.TrustedProxies, pfx.Masked())
	}
	if f.BodyTimeout != nil {
		c.BodyTimeout = time.Duration(*f.BodyTimeout)
		if c.BodyTimeout < 100*time.Millisecond {
			e.add(Problem{Line: fieldLine(top, "body_timeout"), Field: "body_timeout", Msg: "too short (minimum 100ms)"})
		}
	}
	if f.MaxInflight != nil {
		c.MaxInflight = *f.MaxInflight
		if c.MaxInflight < 0 {
			e.add(Problem{Line: fieldLine(top, "max_inflight"), Field: "max_inflight", Msg: "must not be negative (0: no bound)"})
		}
	}
	if f.MaxBody != nil {
		c.MaxBody = int64(*f.MaxBody)
		if c.MaxBody <= 0 {
			e.add(Problem{Line: fieldLine(top, "max_body"), Field: "max_body", Msg: "must be positive"})
		}
	}
	c.Notify = compileNotify(f.Notify, top, e, secretSource{dir: filepath.Dir(name), env: env})
	base := builtinSender()
	probs := base.apply(&f.Defaults)
	base.ownRetryWindow = false // a preset's documented window beats the file's default
	if len(probs) > 0 {
		for _, p := range probs {
			p.Field = "defaults." + p.Field
			p.Line = fieldLine(top, p.Field)
			e.add(p)
		}
	}
	seen := map[string]bool{}
	for i := range f.Senders {
		sf := &f.Senders[i]
		s, probs := compileSender(sf, base, secretSource{dir: filepath.Dir(name), env: env})
		label := sf.Name
		if label == "" {
			label = fmt.Sprintf("#%d", i+1)
		}
		for i := range probs {
			probs[i].Sender, probs[i].Line = label, fieldLine(sf.node, probs[i].Field)
		}
		// An unknown preset is the root cause of whatever it would have
		// set: it comes first, and "key required" or "signature.scheme
		// required" that follow from it are left out.
		if _, known := presets[sf.Preset]; sf.Preset != "" && !known {
			probs = slices.DeleteFunc(probs, func(p Problem) bool {
				return (p.Field == "key" || p.Field == "signature.scheme") && strings.HasPrefix(p.Msg, "required")
			})
		}
		sort.SliceStable(probs, func(i, j int) bool {
			if pi, pj := probs[i].Field == "preset", probs[j].Field == "preset"; pi != pj {
				return pi
			}
			return probs[i].Line < probs[j].Line
		})
		for _, p := range probs {
			e.add(p)
		}
		if sf.Name != "" && seen[sf.Name] {
			e.add(Problem{Sender: label, Line: fieldLine(sf.node, "name"), Field: "name", Msg: "duplicate sender name"})
		}
		seen[sf.Name] = true
		if s != nil {
			c.Senders = append(c.Senders, s)
			c.router.add(s)
			for _, w := range s.warnings() {
				c.Warnings = append(c.Warnings, fmt.Sprintf("%s: sender %q: %s", name, s.Name, w))
			}
		}
	}
	c.Warnings = append(c.Warnings, c.router.conflicts(name)...)
	pathsNode := lookupNode(top, "paths")
	for _, path := range sortedKeys(f.Paths) {
		pf := f.Paths[path]
		field := "paths." + path
		line := fieldLine(top, "paths")
		if n := lookupNode(pathsNode, path); n != nil {
			line = n.Line
		}
		var rt *Route
		for _, r := range c.router.routes {
			if r.Path == path {
				rt = r
			}
		}
		switch {
		case len(e.Problems) == 0 && rt == nil:
			e.add(Problem{Line: line, Field: field, Msg: "no sender names this path (write it as in match.path)"})
		case pf.Unmatched == "" || pf.Unmatched == UnmatchedReject || pf.Unmatched == UnmatchedPass:
			if rt != nil && pf.Unmatched != "" {
				rt.Unmatched, rt.UnmatchedDefault = pf.Unmatched, false
			}
		default:
			e.add(Problem{Line: line, Field: field + ".unmatched", Msg: fmt.Sprintf("%q: want reject or pass%s", pf.Unmatched, didYouMean(pf.Unmatched, []string{UnmatchedReject, UnmatchedPass}))})
		}
	}
	for _, rt := range c.router.routes {
		rt.settleUnmatched()
	}
	c.Warnings = append(c.Warnings, c.router.overlaps(name)...)
	if w := bitrixReading(c, name); w != "" {
		c.Warnings = append(c.Warnings, w)
	}
	if len(e.Problems) > 0 {
		return nil, e
	}
	return c, nil
}

// compileSite checks the site: section; problems go into e.
func compileSite(sf siteFile, top *yaml.Node, e *Error) Site {
	site := Site{Index: DefaultIndex, MultiViews: sf.MultiViews}
	if sf.Index != nil {
		site.Index = nil
		for i, n := range *sf.Index {
			field := fmt.Sprintf("site.index[%d]", i)
			switch {
			case n == "" || n == "." || n == "..":
				e.add(Problem{Line: fieldLine(top, field), Field: field, Msg: fmt.Sprintf("%q: want a file name such as index.php", n)})
			case strings.ContainsAny(n, "/%\x00"):
				e.add(Problem{Line: fieldLine(top, field), Field: field, Msg: fmt.Sprintf("%q: a file name, without /, %% or NUL", n)})
			default:
				site.Index = append(site.Index, n)
			}
		}
	}
	for i, x := range sf.Extensions {
		field := fmt.Sprintf("site.extensions[%d]", i)
		if len(x) < 2 || x[0] != '.' || strings.ContainsAny(x, "/%\x00") {
			e.add(Problem{Line: fieldLine(top, field), Field: field, Msg: fmt.Sprintf("%q: want an extension such as .php (a dot, then no /, %% or NUL)", x)})
			continue
		}
		site.Extensions = append(site.Extensions, x)
	}
	switch sf.Request {
	case "", "php":
	case SiteRequestGetPost:
		site.Request = SiteRequestGetPost
	default:
		e.add(Problem{Line: fieldLine(top, "site.request"), Field: "site.request", Msg: fmt.Sprintf("%q: want get_post (the site reads request: names as array_merge($_GET, $_POST), as 1C-Bitrix's $request->get() does) or php (any way PHP may, the default)%s", sf.Request, didYouMean(sf.Request, []string{SiteRequestGetPost, "php"}))})
	}
	return site
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func (e *Error) add(p Problem) { e.Problems = append(e.Problems, p) }

// yamlProblem turns one of the decoder's messages into a Problem in the
// operator's words, with the unknown setting's name when it is about one.
func yamlProblem(msg string) (Problem, string) {
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		text, name := userWordsName(m[2])
		return Problem{Line: n, Msg: text}, name
	}
	text, name := userWordsName(strings.TrimPrefix(msg, "yaml: "))
	return Problem{Msg: text}, name
}

// lookupNode returns the value of key in mapping node m, or nil.
func lookupNode(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// fieldLine finds the line of a field such as "match.path", "key[1]" or
// "signature.secret_env" under node n. A field the file does not spell
// out (a preset's, a required one left out) gets the line of the nearest
// enclosing node that is there; 0 when n is nil.
func fieldLine(n *yaml.Node, field string) int {
	if n == nil {
		return 0
	}
	line := n.Line
	for _, seg := range strings.Split(field, ".") {
		name, idx, hasIdx := seg, 0, false
		if i := strings.IndexByte(seg, '['); i > 0 && strings.HasSuffix(seg, "]") {
			if k, err := strconv.Atoi(seg[i+1 : len(seg)-1]); err == nil {
				name, idx, hasIdx = seg[:i], k, true
			}
		}
		v := lookupNode(n, name)
		if v == nil {
			return line
		}
		n, line = v, v.Line
		if hasIdx {
			if n.Kind != yaml.SequenceNode || idx >= len(n.Content) {
				return line
			}
			n, line = n.Content[idx], n.Content[idx].Line
		}
	}
	return line
}

func builtinSender() Sender {
	final, _ := ParseStatusSet(DefaultFinalStatuses)
	return Sender{
		TTL: DefaultTTL, Lease: DefaultLease, UpstreamTimeout: DefaultUpstreamTimeout,
		StoreTimeout: DefaultStoreTimeout, WaitTimeout: DefaultWaitTimeout,
		MaxStoredBody: DefaultMaxStoredBody, InProgress: InProgressWait, MissingKey: MissingReject,
		OnStoreError: StoreErrReject, ForwardKeyHeader: DefaultForwardKeyHeader, Hash: HashRaw,
		ConflictStatus: DefaultConflictStatus, Ambiguous: AmbiguousRelease, Mode: ModeEnforce,
		FinalStatuses: final, Ack: AckSite, RetryFor: DefaultRetryFor, AckBacklog: DefaultAckBacklog,
	}
}

// compileSender builds one sender over base (the built-in and file
// defaults); src is where its secrets are looked up.
func compileSender(sf *senderFile, base Sender, src secretSource) (*Sender, []Problem) {
	s := base
	s.Ignore = append([]string(nil), base.Ignore...)
	s.StripResponseHeaders = append([]string(nil), base.StripResponseHeaders...)
	var probs []Problem
	bad := func(field, format string, args ...any) {
		probs = append(probs, Problem{Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	s.Name = sf.Name
	switch {
	case sf.Name == "":
		bad("name", "required")
	case !senderName.MatchString(sf.Name):
		bad("name", "%q: use lowercase letters, digits, '-' and '_' (it names keys and metrics)", sf.Name)
	}

	// The preset first, so every field the sender sets overrides it.
	sigCfg := sf.Signature
	if sf.Preset != "" {
		p, ok := presets[sf.Preset]
		if !ok {
			bad("preset", "unknown preset %q%s (known: %s)", sf.Preset, didYouMean(sf.Preset, presetNames()), strings.Join(presetNames(), ", "))
		} else {
			s.Preset = sf.Preset
			if !s.ownRetryWindow {
				s.RetryWindow = p.RetryWindow
			}
			if len(sf.Key) == 0 {
				s.Keys = append([]KeyPart(nil), p.Keys...)
			}
			if p.Signature.Scheme != "" || sf.Signature != nil {
				// A preset for a sender that signs nothing (mollie) has
				// no scheme: unless the file adds one, nothing is checked.
				sigCfg = p.Signature.merge(sf.Signature)
			}
			s.Success = p.Success
			if p.FinalStatuses != "" {
				s.FinalStatuses = *mustStatuses(p.FinalStatuses)
			}
			if sf.FinalStatuses != nil && sf.Success == nil && p.Success != nil && p.Success.Statuses != nil {
				// The sender's own final_statuses is the operator saying
				// which answers to store: it replaces the statuses of the
				// preset's success rule too (YooKassa's "200 only"), and
				// the rest of that rule (a body to match) still holds.
				su := *p.Success
				su.Statuses = nil
				s.Success = &su
			}
			s.presetMethods = p.Methods
			s.NoDedupe = append([]NoDedupeShape(nil), p.NoDedupe...)
			s.Pings = p.Pings
			if len(sf.Key) > 0 {
				// A key of the operator's own is a claim that it names one
				// notification: the preset's forwarding of every delivery
				// (bitrix24, woocommerce) gives way; its named shapes stay.
				s.NoDedupe = slices.DeleteFunc(s.NoDedupe, func(sh NoDedupeShape) bool {
					return len(sh.When) == 0 && !sh.IfKeyMissing
				})
			}
			s.DuplicateStatus = presetDuplicateStatus(sf.Preset)
			if p.ChangedPayload != "" {
				s.ChangedPayload = p.ChangedPayload
			}
			if p.Hash != "" {
				// The defaults' ignore paths still count when they were
				// for hash: json; the preset adds its own.
				if s.Hash != p.Hash {
					s.Ignore = nil
				}
				s.Hash, s.Ignore = p.Hash, append(s.Ignore, p.Ignore...)
			}
		}
	}
	probs = append(probs, s.compileDedupe(sf)...)
	if sf.Success != nil {
		su, sprobs := compileSuccess(sf.Success)
		probs = append(probs, sprobs...)
		s.Success = su
	}

	switch m := strings.ToUpper(strings.TrimSpace(sf.Match.Method)); m {
	case "":
		s.Methods = []string{http.MethodPost}
		if len(s.presetMethods) > 0 {
			s.Methods = append([]string(nil), s.presetMethods...)
		}
	case "*", "ANY":
		s.Methods = nil
	default:
		for part := range strings.SplitSeq(m, ",") {
			if part = strings.TrimSpace(part); !httpToken.MatchString(part) {
				bad("match.method", "%q: want a method such as POST, a comma-separated list, or *", sf.Match.Method)
				break
			}
			s.Methods = append(s.Methods, part)
		}
	}
	for i, cf := range sf.Match.When {
		cond, err := compileCondition(cf)
		if err != nil {
			bad(fmt.Sprintf("match.when[%d]", i), "%v", err)
			continue
		}
		s.When = append(s.When, cond)
	}
	s.Path = sf.Match.Path
	switch {
	case s.Path == "":
		bad("match.path", "required")
	case !strings.HasPrefix(s.Path, "/"):
		bad("match.path", "%q must start with /", s.Path)
	case strings.Contains(strings.TrimSuffix(s.Path, "*"), "*"):
		bad("match.path", "%q: only a trailing * is allowed", s.Path)
	default:
		// The path is matched as the site runs it, so it is written that way.
		base, star := strings.CutSuffix(s.Path, "*")
		if norm, err := NormalizePath(base); err != nil || (norm != base && !(star && norm+"/" == base)) {
			bad("match.path", "%q: write the path as the site runs it (no %%-escapes, //, . or .. segments, or trailing /)", s.Path)
		}
	}

	s.Keys = append(s.Keys, compileKeyParts("key", sf.Key, bad)...)
	if len(s.Keys) == 0 && len(sf.Key) == 0 && s.Name != "" && !s.DedupeOff() {
		bad("key", "required: at least one of header, body, query, form or request (or a preset that sets it)")
	}

	probs = append(probs, s.apply(&sf.policyFile)...)
	if sf.Serialize != nil {
		ser := &Serialize{Scope: sf.Serialize.Scope, Wait: s.UpstreamTimeout}
		if ser.Scope == "" {
			ser.Scope = s.Name
		} else if !scopeName.MatchString(ser.Scope) {
			bad("serialize.scope", "%q: letters, digits, '.', '_' and '-', at most 64", ser.Scope)
		}
		ser.Keys = compileKeyParts("serialize.key", sf.Serialize.Key, bad)
		if len(sf.Serialize.Key) == 0 {
			bad("serialize.key", "required: the object's key, as for key (header, body, query, form or request)")
		}
		if w := sf.Serialize.Wait; w != nil {
			if time.Duration(*w) < 10*time.Millisecond {
				bad("serialize.wait", "%s is too short (minimum 10ms)", time.Duration(*w))
			}
			ser.Wait = time.Duration(*w)
		}
		s.Serialize = ser
	} else if keys := presetSerialize(s.Preset); keys != nil {
		s.Serialize = &Serialize{Scope: s.Name, Keys: append([]KeyPart(nil), keys...), Wait: s.UpstreamTimeout}
	}
	// A ttl the file leaves alone covers the preset's retry window, so a
	// config that sets none never warns (Standard Webhooks' 75h is more
	// than the built-in 72h).
	if !s.ownTTL && s.TTL < s.RetryWindow {
		s.TTL = s.RetryWindow
	}

	s.ownKey = len(sf.Key) > 0
	if sigCfg != nil {
		s.sigCover = signatureCoverage(*sigCfg)
		v, sigProbs := compileSignature(*sigCfg, src)
		probs = append(probs, sigProbs...)
		s.verifier = v
	}
	if s.verifier != nil || sigCfg == nil {
		probs = append(probs, s.bindSuccessSecrets()...)
	}
	probs = append(probs, s.settleAck()...)
	if s.Ack == AckDurable {
		// The kept request is the delivery hookonce owes the site.
		if sf.StoreRequestBody != nil && !*sf.StoreRequestBody {
			bad("store_request_body", "ack: durable keeps the request to deliver it later: remove store_request_body: false")
		}
		s.StoreRequestBody = true
	}
	if len(probs) > 0 {
		return nil, probs
	}
	return &s, nil
}

// compileDedupe applies the sender's dedupe, no_dedupe and
// changed_payload over what the preset set.
func (s *Sender) compileDedupe(sf *senderFile) []Problem {
	var probs []Problem
	bad := func(field, format string, args ...any) {
		probs = append(probs, Problem{Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	if d := sf.Dedupe; d != nil {
		switch *d {
		case "on":
			// The preset's whole-sender off goes; its named shapes stay.
			s.NoDedupe = slices.DeleteFunc(s.NoDedupe, func(sh NoDedupeShape) bool {
				return len(sh.When) == 0 && !sh.IfKeyMissing
			})
		case "off":
			s.NoDedupe = append(s.NoDedupe, NoDedupeShape{Reason: "dedupe: off"})
		default:
			bad("dedupe", "%q: want on or off", *d)
		}
	}
	for i, nf := range sf.NoDedupe {
		field := fmt.Sprintf("no_dedupe[%d]", i)
		shape := NoDedupeShape{IfKeyMissing: nf.IfKeyMissing, Reason: strings.TrimSpace(nf.Reason)}
		if len(nf.When) == 0 {
			bad(field+".when", "required: the conditions that name this shape (for every delivery write dedupe: off)")
		}
		for j, cf := range nf.When {
			c, err := compileCondition(cf)
			if err != nil {
				bad(fmt.Sprintf("%s.when[%d]", field, j), "%v", err)
				continue
			}
			shape.When = append(shape.When, c)
		}
		if shape.Reason == "" {
			shape.Reason = field
		}
		s.NoDedupe = append(s.NoDedupe, shape)
	}
	if s.ChangedPayload == "" {
		s.ChangedPayload = ChangedConflict
	}
	policy(&probs, "changed_payload", &s.ChangedPayload, sf.ChangedPayload, ChangedConflict, ChangedDuplicate, ChangedNewEvent)
	return probs
}

// compileKeyParts compiles the parts of a key (key, serialize.key),
// reporting each bad one under field[i].
func compileKeyParts(field string, kfs []keyPartFile, bad func(field, format string, args ...any)) []KeyPart {
	var parts []KeyPart
	for i, kf := range kfs {
		part, err := compileKeyPart(kf)
		if err != nil {
			bad(fmt.Sprintf("%s[%d]", field, i), "%v", err)
			continue
		}
		parts = append(parts, part)
	}
	return parts
}

// apply overlays the set fields of pf on s and checks each one.
func (s *Sender) apply(pf *policyFile) []Problem {
	var probs []Problem
	bad := func(field, format string, args ...any) {
		probs = append(probs, Problem{Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	dur := func(field string, dst *time.Duration, v *Duration, min time.Duration) {
		if v == nil {
			return
		}
		if time.Duration(*v) < min {
			bad(field, "%s is too short (minimum %s)", time.Duration(*v), min)
			return
		}
		*dst = time.Duration(*v)
	}
	dur("ttl", &s.TTL, pf.TTL, time.Second)
	if pf.TTL != nil {
		s.ownTTL = true
	}
	dur("lease", &s.Lease, pf.Lease, 300*time.Millisecond)
	dur("upstream_timeout", &s.UpstreamTimeout, pf.UpstreamTimeout, 10*time.Millisecond)
	dur("store_timeout", &s.StoreTimeout, pf.StoreTimeout, 10*time.Millisecond)
	if pf.WaitTimeout != nil {
		if *pf.WaitTimeout < 0 {
			bad("wait_timeout", "must not be negative")
		} else {
			s.WaitTimeout = time.Duration(*pf.WaitTimeout)
		}
	}
	if pf.MaxStoredBody != nil {
		s.MaxStoredBody = int64(*pf.MaxStoredBody)
	}
	if pf.StoreRequestBody != nil {
		s.StoreRequestBody = *pf.StoreRequestBody
	}
	if pf.RetryWindow != nil {
		s.RetryWindow = time.Duration(*pf.RetryWindow)
		s.ownRetryWindow = true
		if s.RetryWindow <= 0 {
			bad("retry_window", "must be positive")
		}
	}
	policy(&probs, "in_progress", &s.InProgress, pf.InProgress, InProgressWait, InProgressReject)
	policy(&probs, "missing_key", &s.MissingKey, pf.MissingKey, MissingReject, MissingPass)
	policy(&probs, "on_store_error", &s.OnStoreError, pf.OnStoreError, StoreErrReject, StoreErrForward)
	policy(&probs, "ambiguous", &s.Ambiguous, pf.Ambiguous, AmbiguousRelease, AmbiguousHold)
	policy(&probs, "mode", &s.Mode, pf.Mode, ModeEnforce, ModeShadow)
	policy(&probs, "hash", &s.Hash, pf.Hash, HashRaw, HashJSON)
	if pf.ForwardKeyHeader != nil {
		s.ForwardKeyHeader = strings.TrimSpace(*pf.ForwardKeyHeader)
	}
	if pf.Ignore != nil {
		s.Ignore = pf.Ignore
	}
	if pf.StripResponseHeaders != nil {
		s.StripResponseHeaders = pf.StripResponseHeaders
	}
	s.applyAck(pf, bad)
	if pf.Conflict != nil {
		if st := pf.Conflict.Status; st != nil {
			if *st < 400 || *st > 599 {
				bad("conflict.status", "%d: want a 4xx or 5xx status", *st)
			} else {
				s.ConflictStatus = *st
			}
		}
		if pf.Conflict.Body != nil {
			s.ConflictBody = *pf.Conflict.Body
		}
	}
	if d := pf.Duplicate; d != nil {
		if *d == "replay" {
			s.DuplicateStatus = 0
		} else if n, err := strconv.Atoi(*d); err != nil || n < 200 || n > 599 {
			bad("duplicate", "%q: want replay or a status such as 200", *d)
		} else {
			s.DuplicateStatus = n
		}
	}
	if pf.FinalStatuses != nil {
		set, err := ParseStatusSet(*pf.FinalStatuses)
		if err != nil {
			bad("final_statuses", "%v", err)
		} else {
			s.FinalStatuses = set
		}
	}
	if len(s.Ignore) > 0 && s.Hash != HashJSON && pf.Ignore != nil {
		bad("ignore", "only applies with hash: json")
	}
	return probs
}

// policy sets *dst to v when v is one of allowed, else records a problem.
func policy[T ~string](probs *[]Problem, field string, dst *T, v *string, allowed ...T) {
	if v == nil {
		return
	}
	names := make([]string, len(allowed))
	for i, a := range allowed {
		if *v == string(a) {
			*dst = a
			return
		}
		names[i] = string(a)
	}
	*probs = append(*probs, Problem{Field: field, Msg: fmt.Sprintf("%q: want one of %s%s", *v, strings.Join(names, ", "), didYouMean(*v, names))})
}

func presetNames() []string {
	var names []string
	for n := range presets {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return []string{"none in this build"}
	}
	return names
}

var (
	senderName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)
	httpToken  = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Z-]+$")
)

// bitrixReading warns about a 1C-Bitrix path whose senders read request:
// names while the file does not say the site reads them as Bitrix does:
// a request: name a cookie also holds is then refused (400), where
// site.request: get_post reads it as $request->get() does.
func bitrixReading(c *Contract, file string) string {
	if c.Site.Request != "" {
		return ""
	}
	for _, s := range c.Senders {
		if !strings.HasPrefix(s.Path, "/bitrix/") {
			continue
		}
		reads := slices.ContainsFunc(s.When, func(cd Condition) bool { return cd.Source == FromRequest }) ||
			slices.ContainsFunc(s.Keys, func(k KeyPart) bool { return k.Source == FromRequest })
		if reads {
			return file + ": sender " + s.Name + " reads request: names on a 1C-Bitrix path; Bitrix reads them as $request->get() " +
				"(the query and the form, never cookies): write site: { request: get_post }, or a request that also " +
				"carries such a name as a cookie is refused with 400 (docs/configuration.md: site.request)"
		}
	}
	return ""
}
