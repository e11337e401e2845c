package php

import (
	"bytes"
	"strings"
)

// A multipart/form-data body is read here the way PHP 8.2's rfc1867 reader
// (main/rfc1867.c) fills $_POST, not the way Go's mime/multipart reads it:
// the two disagree on boundaries, part headers, quoting, files and
// transfer encodings, and a site behind hookonce reads PHP's way. Each rule
// below was checked against php-cgi (multipart_test.go holds them):
//
//   - the boundary is found by a case-sensitive search for "boundary"
//     anywhere in the whole Content-Type value (a case-insensitive one
//     when that finds nothing), then the next "="; a quoted value runs to
//     the next quote (none: PHP reads nothing), an unquoted one to the
//     first "," or ";". So "xboundary=A; boundary=B" is A, a repeated
//     boundary is the first, and "boundary = A" is " A";
//   - a part starts after a line that is exactly "--" + boundary (lines end
//     at LF, one CR before it dropped); anything else is skipped, so a
//     preamble, "--boundary--" and an epilogue that holds a boundary line
//     are all just lines, and a body may end without a final boundary;
//   - part headers run to an empty line (or the end of the body); a line
//     that starts with whitespace or has no ":" continues the previous
//     header (it is dropped when there is none); header names are matched
//     case-insensitively and as written ("Content-Disposition :" is not
//     it); the first Content-Disposition counts, a part without one is
//     skipped (its body is then scanned for the next boundary line);
//   - Content-Disposition is split at ";" (quotes respected), and only
//     parameters named name and filename (any case) count: the disposition
//     type is not checked ("attachment; name=x" is a field), "filename*="
//     is not a filename, a repeated name keeps the last; values are quoted
//     with " or ' (a backslash escapes the quote or a backslash) or run to
//     the next whitespace;
//   - a part with a filename, even filename="", is a file and goes to
//     $_FILES; a part with a name and no filename is a field; a part with
//     neither ends the reading ("garbled"): the fields before it stay;
//   - a field's value runs to the first LF + "--" + boundary, anywhere, or
//     to the end of the body, and loses one CR before it;
//     Content-Transfer-Encoding is ignored (quoted-printable stays encoded);
//   - names follow PHP's form-name rules (not URL-decoded); at most
//     max_input_vars (1000) fields are registered, empty names counted, the
//     rest are read and dropped; parts with a Content-Disposition past
//     max_multipart_body_parts (default max_input_vars + max_file_uploads,
//     1020) end the reading.
//
// Shapes whose outcome depends on more than this (PHP's 5 KiB line buffer,
// upload limits, names an uploaded file protects) are refused: see
// unreadable reasons below.
const (
	maxMultipartParts = maxInputVars + maxFileUploads
	maxFileUploads    = 20
	// phpLineLimit keeps every line PHP reads with get_line well inside its
	// FILLUNIT (5120-byte) buffer, past which it splits lines.
	phpLineLimit = 4096
	// maxBoundary: PHP refuses or mis-reads longer ones; RFC 2046 allows 70.
	maxBoundary = 200
	// uploadMaxFilesize is PHP's default upload_max_filesize (2M): a larger
	// file is cut off mid-read and the rest scanned as lines.
	uploadMaxFilesize = 2 << 20
)

// multipartBoundary finds the boundary in a Content-Type value as
// rfc1867_post_handler does; ok is false when PHP reads no boundary.
func multipartBoundary(ct string) (string, bool) {
	i := strings.Index(ct, "boundary")
	if i < 0 {
		i = strings.Index(strings.ToLower(ct), "boundary")
	}
	if i < 0 {
		return "", false
	}
	j := strings.IndexByte(ct[i:], '=')
	if j < 0 {
		return "", false
	}
	b := ct[i+j+1:]
	if strings.HasPrefix(b, `"`) {
		end := strings.IndexByte(b[1:], '"')
		if end < 0 {
			return "", false
		}
		return b[1 : 1+end], true
	}
	if end := strings.IndexAny(b, ",;"); end >= 0 {
		b = b[:end]
	}
	return b, true
}

// mpReader walks a multipart body as PHP's multipart_buffer does, over the
// whole body at once.
type mpReader struct {
	body []byte
	pos  int
	bad  string // why the body cannot be read as PHP would
}

// line returns the next LF-terminated line without its LF and one CR
// before it; ok is false at the end of the body or when the rest has no LF
// (PHP's get_line returns nothing then).
func (r *mpReader) line() ([]byte, bool) {
	i := bytes.IndexByte(r.body[r.pos:], '\n')
	if i < 0 {
		if len(r.body)-r.pos >= phpLineLimit {
			r.bad = "a multipart line longer than PHP's line buffer"
		}
		return nil, false
	}
	l := r.body[r.pos : r.pos+i]
	r.pos += i + 1
	if len(l) >= phpLineLimit {
		r.bad = "a multipart line longer than PHP's line buffer"
		return nil, false
	}
	return bytes.TrimSuffix(l, []byte("\r")), true
}

// findBoundary skips lines up to one that is exactly "--"+boundary.
func (r *mpReader) findBoundary(delim []byte) bool {
	for {
		l, ok := r.line()
		if !ok {
			return false
		}
		if bytes.Equal(l, delim) {
			return true
		}
	}
}

type mpHeader struct{ key, value string }

// headers reads a part's header lines (multipart_buffer_headers).
func (r *mpReader) headers() []mpHeader {
	var hs []mpHeader
	for {
		l, ok := r.line()
		if !ok || len(l) == 0 {
			return hs
		}
		if bytes.IndexByte(l, 0) >= 0 {
			r.bad = "a NUL byte in a multipart header"
			return hs
		}
		colon := -1
		if !isCSpace(l[0]) {
			colon = bytes.IndexByte(l, ':')
		}
		switch {
		case colon >= 0:
			v := l[colon+1:]
			for len(v) > 0 && isCSpace(v[0]) {
				v = v[1:]
			}
			hs = append(hs, mpHeader{string(l[:colon]), string(v)})
		case len(hs) > 0:
			hs[len(hs)-1].value += string(l)
		}
	}
}

// readBody returns the data up to the next LF + "--" + boundary (or a
// prefix of it that ends the body), less one CR before it, and moves past
// the data (multipart_buffer_read_body); the LF stays for findBoundary.
func (r *mpReader) readBody(next []byte) []byte {
	rest := r.body[r.pos:]
	end := len(rest)
	for i := 0; i < len(rest); i++ {
		j := bytes.IndexByte(rest[i:], '\n')
		if j < 0 {
			break
		}
		i += j
		tail := rest[i:]
		if bytes.HasPrefix(tail, next) || len(tail) < len(next) && bytes.HasPrefix(next, tail) {
			end = i
			break
		}
	}
	data := rest[:end]
	r.pos += end
	if end < len(rest) && end > 0 && data[end-1] == '\r' {
		data = data[:end-1]
		r.pos-- // PHP leaves the CR in its buffer
	}
	return data
}

// ParseMultipart fills $_POST from a multipart body. bad is non-empty
// when the body holds a shape whose reading by PHP is not modelled here.
func ParseMultipart(body []byte, ct string) (root *Var, bad string) {
	root = NewArray()
	boundary, ok := multipartBoundary(ct)
	if !ok {
		return root, "" // PHP warns "Missing boundary" and reads nothing
	}
	if boundary == "" || len(boundary) > maxBoundary || strings.IndexByte(boundary, 0) >= 0 {
		return nil, "a multipart boundary that is empty or too long"
	}
	delim := []byte("--" + boundary)
	next := []byte("\n--" + boundary)
	r := &mpReader{body: body}
	fields, parts, files := 0, 0, 0
	var fileNames []string // top-level names of uploaded files: PHP protects them
	maxFileSize := false
	for r.pos < len(body) {
		if !r.findBoundary(delim) {
			break
		}
		hs := r.headers()
		if r.bad != "" {
			return nil, r.bad
		}
		cd, ok := "", false
		for _, h := range hs {
			if strings.EqualFold(h.key, "Content-Disposition") {
				cd, ok = h.value, true
				break
			}
		}
		if !ok {
			continue
		}
		if parts++; parts > maxMultipartParts {
			break
		}
		name, filename, hasName, hasFile := dispositionParams(cd)
		if !hasName && !hasFile {
			break // PHP: "File Upload Mime headers garbled"; stops reading
		}
		if hasFile {
			if files++; files > maxFileUploads {
				return nil, "more file parts than max_file_uploads"
			}
			if hasName && !balancedUploadName(name) || filename == "" {
				// PHP skips the upload without reading its data: the data
				// is scanned as lines for the next boundary.
				continue
			}
			if maxFileSize {
				return nil, "a file part after a MAX_FILE_SIZE field"
			}
			data := r.readBody(next)
			if len(data) > uploadMaxFilesize-8192 {
				return nil, "a file part near upload_max_filesize"
			}
			fileNames = append(fileNames, looseTopName(name))
			continue
		}
		val := r.readBody(next)
		if len(fileNames) > 0 {
			top := looseTopName(name)
			for _, f := range fileNames {
				if top == f {
					return nil, "a field named like an uploaded file after it"
				}
			}
		}
		if strings.Contains(strings.ToUpper(name), "MAX_FILE_SIZE") { // PHP's name, and every spelling near it
			maxFileSize = true
		}
		if fields++; fields <= maxInputVars {
			root.register(name, string(val))
		}
	}
	if r.bad != "" {
		return nil, r.bad
	}
	return root, ""
}

// dispositionParams reads the name and filename parameters of a
// Content-Disposition value as rfc1867_post_handler does.
func dispositionParams(cd string) (name, filename string, hasName, hasFile bool) {
	for cd != "" {
		var pair string
		pair, cd = phpGetword(cd, ';')
		for cd != "" && isCSpace(cd[0]) {
			cd = cd[1:]
		}
		if !strings.Contains(pair, "=") {
			continue
		}
		key, val := phpGetword(pair, '=')
		switch {
		case strings.EqualFold(key, "name"):
			name, hasName = phpGetwordConf(val), true
		case strings.EqualFold(key, "filename"):
			filename, hasFile = phpGetwordConf(val), true
		}
	}
	return
}

// phpGetword is php_ap_getword: the text up to stop outside quotes, and
// the rest after every stop byte that follows.
func phpGetword(s string, stop byte) (word, rest string) {
	i := 0
	for i < len(s) && s[i] != stop {
		if q := s[i]; q == '"' || q == '\'' {
			i++
			for i < len(s) && s[i] != q {
				if s[i] == '\\' && i+1 < len(s) && s[i+1] == q {
					i += 2
				} else {
					i++
				}
			}
			if i < len(s) {
				i++
			}
			continue
		}
		i++
	}
	if i >= len(s) {
		return s, ""
	}
	word = s[:i]
	for i < len(s) && s[i] == stop {
		i++
	}
	return word, s[i:]
}

// phpGetwordConf is php_ap_getword_conf: leading whitespace skipped, then
// a value quoted with " or ' (a backslash escapes the quote or a
// backslash) or one running to the next whitespace.
func phpGetwordConf(s string) string {
	for s != "" && isCSpace(s[0]) {
		s = s[1:]
	}
	if s == "" {
		return ""
	}
	var quote byte
	if s[0] == '"' || s[0] == '\'' {
		quote = s[0]
		s = s[1:]
	} else {
		end := 0
		for end < len(s) && !isCSpace(s[end]) {
			end++
		}
		s = s[:end]
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if quote != 0 && c == quote {
			break
		}
		if c == '\\' && i+1 < len(s) && (s[i+1] == '\\' || quote != 0 && s[i+1] == quote) {
			i++
			c = s[i]
		}
		b.WriteByte(c)
	}
	return b.String()
}

// balancedUploadName is PHP's check on an upload's name ("never repair
// potential malicious user input"): brackets balanced, nothing but "["
// after a "]".
func balancedUploadName(name string) bool {
	depth := 0
	for i := 0; i < len(name); i++ {
		switch name[i] {
		case '[':
			depth++
		case ']':
			depth--
			if i+1 < len(name) && name[i+1] != '[' {
				return false
			}
		}
		if depth < 0 {
			return false
		}
	}
	return depth == 0
}

// looseTopName is a name's top level with spacing and PHP's "_" mangling
// folded away, for the conservative check on names an upload protects.
func looseTopName(name string) string {
	if i := strings.IndexByte(name, 0); i >= 0 {
		name = name[:i]
	}
	if i := strings.IndexByte(name, '['); i >= 0 {
		name = name[:i]
	}
	return strings.Trim(strings.Map(func(r rune) rune {
		if r == '.' || r == ' ' || r == '_' || r < 0x20 {
			return '_'
		}
		return r
	}, name), "_")
}
