package contract

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/hookonce/hookonce/contract/internal/php"
	"github.com/hookonce/hookonce/contract/internal/php/phptest"
	"github.com/hookonce/hookonce/internal/testkit/testenv"
)

// These tests hold hookonce's reading of request bodies to PHP 8.2's
// $_POST and $_GET as php-cgi fills them: the same request goes to php-cgi
// (driven directly as a CGI) and to Request, and the two must agree unless
// Request.Unreadable refuses the body.
//
// Shapes refused as unreadable (Unreadable wraps ErrUnreadableBody), and
// why; every other form body is read as PHP reads it:
//   - a Content-Type sent more than once when one of them is a form type:
//     servers keep the first, the last or join them;
//   - a form body over post_max_size (8M): the site's own limit decides;
//   - a multipart boundary that is empty or longer than 200 bytes;
//   - a multipart line PHP reads as a line (boundary search, part headers)
//     of 4096 bytes or more: PHP's 5 KiB buffer splits such lines;
//   - a NUL byte in a part header: PHP cuts C strings there;
//   - more than max_file_uploads (20) file parts, a file part within 8 KiB
//     of upload_max_filesize (2M), or a file part after a MAX_FILE_SIZE
//     field: PHP cuts or skips such uploads mid-data and rescans the rest;
//   - a field after an uploaded file whose top-level name matches the
//     file's: PHP drops fields an upload protects ("f", "f[tmp_name]").

// phpCGIRequest is one request as php-cgi and Request both read it.
type phpCGIRequest struct {
	Method, CT, Query string
	Body              []byte
}

type phpCGIResult struct {
	Get, Post, Merged any
}

const phpDumpScript = `<?php
function hx($v) { if (is_array($v)) { $o = []; foreach ($v as $k => $e) { $o[bin2hex((string)$k)] = hx($e); } return $o; } return bin2hex((string)$v); }
echo json_encode(["get" => hx($_GET), "post" => hx($_POST), "merged" => hx(array_merge($_GET, $_POST))], JSON_FORCE_OBJECT);
`

func needPHPCGI(t testing.TB) (cgi, script string) {
	t.Helper()
	cgi = testenv.LookPath(t, "apt-get install php-cgi: the PHP body reference is not run", "php-cgi")
	script = filepath.Join(t.TempDir(), "dump.php")
	if err := os.WriteFile(script, []byte(phpDumpScript), 0o644); err != nil {
		t.Fatal(err)
	}
	return cgi, script
}

// unhexPHP turns dump.php's hex-encoded arrays back into bytes.
func unhexPHP(v any) (any, error) {
	switch v := v.(type) {
	case string:
		b, err := hex.DecodeString(v)
		return string(b), err
	case map[string]any:
		out := map[string]any{}
		for k, e := range v {
			kb, err := hex.DecodeString(k)
			if err != nil {
				return nil, err
			}
			if out[string(kb)], err = unhexPHP(e); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("unexpected %T", v)
}

// runPHPCGI runs every request through php-cgi, a few at once.
func runPHPCGI(t *testing.T, reqs []phpCGIRequest) []phpCGIResult {
	cgi, script := needPHPCGI(t)
	out := make([]phpCGIResult, len(reqs))
	errs := make([]error, len(reqs))
	var wg sync.WaitGroup
	work := make(chan int)
	for range max(2, runtime.NumCPU()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				out[i], errs[i] = phpCGIOne(cgi, script, reqs[i])
			}
		}()
	}
	for i := range reqs {
		work <- i
	}
	close(work)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("php-cgi on request %d (%q %q): %v", i, reqs[i].Method, reqs[i].CT, err)
		}
	}
	return out
}

func phpCGIOne(cgi, script string, r phpCGIRequest) (phpCGIResult, error) {
	cmd := exec.Command(cgi, "-n", "-d", "max_input_vars=1000", "-d", "display_errors=0", "-d", "log_errors=0")
	cmd.Env = []string{"REDIRECT_STATUS=1", "GATEWAY_INTERFACE=CGI/1.1", "REQUEST_METHOD=" + r.Method,
		"SCRIPT_FILENAME=" + script, "CONTENT_TYPE=" + r.CT, "CONTENT_LENGTH=" + strconv.Itoa(len(r.Body)),
		"QUERY_STRING=" + r.Query}
	cmd.Stdin = bytes.NewReader(r.Body)
	res, err := cmd.Output()
	if err != nil {
		return phpCGIResult{}, err
	}
	_, payload, ok := bytes.Cut(res, []byte("\r\n\r\n"))
	if !ok {
		return phpCGIResult{}, fmt.Errorf("no CGI header in %.200q", res)
	}
	var raw struct{ Get, Post, Merged any }
	if err := json.Unmarshal(payload, &raw); err != nil {
		return phpCGIResult{}, fmt.Errorf("%v in %.200q", err, payload)
	}
	var out phpCGIResult
	if out.Get, err = unhexPHP(raw.Get); err == nil {
		if out.Post, err = unhexPHP(raw.Post); err == nil {
			out.Merged, err = unhexPHP(raw.Merged)
		}
	}
	return out, err
}

// flattenPHP names every string leaf as Fields does ("a[b]").
func flattenPHP(v any, prefix string, out map[string]string) {
	m, _ := v.(map[string]any)
	for k, e := range m {
		name := k
		if prefix != "" {
			name = prefix + "[" + k + "]"
		}
		if s, ok := e.(string); ok {
			out[name] = s
		} else {
			flattenPHP(e, name, out)
		}
	}
}

func (r phpCGIRequest) request() *Request {
	h := http.Header{}
	if r.CT != "" {
		h["Content-Type"] = []string{r.CT}
	}
	return &Request{Method: r.Method, Path: "/", Header: h, RawQuery: r.Query, Body: r.Body}
}

// compareWithPHP checks one request against php-cgi's answer; refused is
// true when Unreadable refused the body (the query is still compared).
func compareWithPHP(r phpCGIRequest, ref phpCGIResult) (refused bool, diffs []string) {
	req := r.request()
	if got := php.Plain(req.queryVars()); !reflect.DeepEqual(got, ref.Get) {
		diffs = append(diffs, fmt.Sprintf("$_GET: got %q, php %q", got, ref.Get))
	}
	if err := req.Unreadable(); err != nil {
		if !errors.Is(err, ErrUnreadableBody) {
			diffs = append(diffs, fmt.Sprintf("Unreadable: %v does not wrap ErrUnreadableBody", err))
		}
		if r.Method != http.MethodPost || formKind(r.CT) == "" {
			diffs = append(diffs, fmt.Sprintf("Unreadable refused a body PHP does not parse: %v", err))
		}
		return true, diffs
	}
	var gotPost any = map[string]any{}
	f, err := req.Form()
	switch {
	case err == nil:
		gotPost = php.Plain(f)
	case !errors.Is(err, errNotForm):
		diffs = append(diffs, fmt.Sprintf("Form: %v but Unreadable is nil", err))
	}
	if !reflect.DeepEqual(gotPost, ref.Post) {
		diffs = append(diffs, fmt.Sprintf("$_POST: got %q, php %q", gotPost, ref.Post))
	}
	for _, c := range []struct {
		src  Source
		want any
	}{{FromForm, ref.Post}, {FromQuery, ref.Get}, {FromRequest, ref.Merged}} {
		want := map[string]string{}
		flattenPHP(c.want, "", want)
		got, err := req.Fields(c.src)
		if errors.Is(err, errNotForm) {
			got, err = map[string]string{}, nil
		}
		if c.src == FromRequest && errors.Is(err, errAmbiguousRequest) {
			continue // refused: $_REQUEST reads it otherwise than array_merge
		}
		if err != nil || !reflect.DeepEqual(got, want) {
			diffs = append(diffs, fmt.Sprintf("Fields(%s): got %q (%v), php %q", c.src, got, err, want))
		}
	}
	return false, diffs
}

// Generators: the spellings each hole was found with, mixed at random.

var (
	genFormNames = []string{"id", "InvId", "Shp.item", "Shp item", " id", "a[b]", "a[]", "a[ ]", "a[\t]",
		"a[  ]", "a[ x]", "a[x ]", "a[", "a]b", "data[FIELDS][ID]", "MAX_FILE_SIZE_X", "x+y", "", "a[0]", "f",
		"f[tmp_name]", "_charset_"}
	genFormValues = []string{"", "1", "EVT9", "a b", "x=y", "é", "\x00z", "=41=3D", "a\r\nb", "line\n--BBx", "\r", "--BB", "q\"s"}
)

func genURLEncoded(r *rand.Rand) string {
	var parts []string
	if r.IntN(6) == 0 {
		parts = append(parts, "")
	}
	if r.IntN(8) == 0 { // padding up to and past max_input_vars
		n := 990 + r.IntN(20)
		for i := range n {
			if r.IntN(40) == 0 {
				parts = append(parts, "")
			}
			parts = append(parts, "p"+strconv.Itoa(i)+"=1")
		}
	}
	for range 1 + r.IntN(6) {
		name := genFormNames[r.IntN(len(genFormNames))]
		enc := strings.NewReplacer("\t", "%09", " ", []string{"+", "%20", " "}[r.IntN(3)], "&", "%26", "=", "%3D").Replace(name)
		switch r.IntN(6) {
		case 0:
			parts = append(parts, enc)
		case 1:
			parts = append(parts, "")
		default:
			v := genFormValues[r.IntN(len(genFormValues))]
			parts = append(parts, enc+"="+strings.NewReplacer("%", "%25", "&", "%26", "+", "%2B", "\r", "%0D", "\n", "%0A", "\x00", "%00").Replace(v))
		}
	}
	s := strings.Join(parts, "&")
	if r.IntN(5) == 0 {
		s += "&"
	}
	return s
}

var genURLEncodedCT = []string{"application/x-www-form-urlencoded", "APPLICATION/X-WWW-FORM-URLENCODED",
	"application/x-www-form-urlencoded; charset=UTF-8", "application/x-www-form-urlencoded, text/plain",
	"application/x-www-form-urlencoded ;charset=x", "application/x-www-form-urlencoded;",
	"application/x-www-form-urlencoded,", "application/x-www-form-urlencodedx",
	"application/x-www-form-urlencoded\t;x", "text/plain", "application/json", ""}

// genMultipart returns a Content-Type and body.
func genMultipart(r *rand.Rand) (string, []byte) {
	b := []string{"BB", "----WebKitFormBoundaryq1w2", "a b", "x;y", "Zz09'()+_,-./:=?"}[r.IntN(5)]
	quoted := strings.ContainsAny(b, ";,") || r.IntN(4) == 0
	param := "boundary=" + b
	if quoted {
		param = `boundary="` + b + `"`
	}
	var ct string
	switch r.IntN(12) {
	case 0:
		ct = "multipart/form-data; xboundary=" + b + "; boundary=ZZ"
	case 1:
		ct = "multipart/form-data; " + param + "; boundary=ZZ"
	case 2:
		ct = "Multipart/Form-Data; BOUNDARY=" + b
	case 3:
		ct = "multipart/form-data," + param
	case 4:
		ct = "multipart/form-data; boundary = " + b
	case 5:
		ct = []string{"multipart/form-data", `multipart/form-data; boundary="` + b, "multipart/mixed; " + param,
			"multipart/form-data; charset=boundary", "multipart/form-data ; " + param}[r.IntN(5)]
	default:
		ct = "multipart/form-data; " + param
	}
	nl := "\r\n"
	if r.IntN(6) == 0 {
		nl = "\n"
	}
	var body strings.Builder
	if r.IntN(5) == 0 {
		body.WriteString("preamble" + nl + "--" + b + "x" + nl)
	}
	part := func(headers, value string) {
		body.WriteString("--" + b + nl + headers + nl + value + nl)
	}
	name := func() string {
		n := genFormNames[r.IntN(len(genFormNames))]
		return strings.NewReplacer(`"`, `\"`).Replace(n)
	}
	if r.IntN(10) == 0 { // past max_input_vars or max_multipart_body_parts
		for i := range 995 + r.IntN(30) {
			part(`Content-Disposition: form-data; name="p`+strconv.Itoa(i)+`"`+nl, "1")
		}
	}
	for range r.IntN(7) {
		v := genFormValues[r.IntN(len(genFormValues))]
		cd := "Content-Disposition: "
		switch r.IntN(20) {
		case 0:
			part(cd+`form-data; name="`+name()+`"; filename=""`+nl, v)
		case 1:
			part(cd+`form-data; name="`+name()+`"; filename="a.txt"`+nl+"Content-Type: text/plain"+nl, v)
		case 2:
			part(cd+`form-data; name="`+name()+`"; filename*=UTF-8''a.txt`+nl, v)
		case 3:
			part(cd+`form-data; name="x"; name="`+name()+`"`+nl, v)
		case 4:
			part(cd+`attachment; name=`+strings.ReplaceAll(name(), " ", "_")+nl, v)
		case 5:
			part(cd+`form-data; name="`+name()+`"`+nl+"Content-Transfer-Encoding: quoted-printable"+nl, "=41=3D=\r\nb")
		case 6:
			part(cd+"form-data"+nl, v) // garbled: neither name nor filename
		case 7:
			part("X-Other: 1"+nl, v) // no Content-Disposition
		case 8:
			part("content-DISPOSITION: form-data; NAME='"+name()+"'"+nl, v)
		case 9:
			part("Content-Disposition : form-data; name=\"c\""+nl, v)
		case 10:
			part(cd+"form-data;"+nl+" name=\""+name()+"\""+nl, v) // continuation line
		case 11:
			part(cd+`form-data; name="`+name()+`"`+nl+"garbage line"+nl, v)
		case 12:
			part(cd+`form-data; name = "n"; name= "`+name()+`" `+nl, v)
		case 13:
			part(cd+`form-data; name="a\\"; x="y`+nl, v)
		case 14:
			part(cd+`form-data;name=unq uoted`+nl, v)
		default:
			part(cd+`form-data; name="`+name()+`"`+nl, v)
		}
	}
	switch r.IntN(6) {
	case 0: // no final boundary
	case 1:
		body.WriteString("--" + b + "--")
	case 2:
		body.WriteString("--" + b + "--" + nl + "--" + b + nl + `Content-Disposition: form-data; name="late"` + nl + nl + "L" + nl)
	default:
		body.WriteString("--" + b + "--" + nl)
	}
	return ct, []byte(body.String())
}

func genBodyRequest(r *rand.Rand) phpCGIRequest {
	req := phpCGIRequest{Method: "POST"}
	switch r.IntN(10) {
	case 0:
		req.Method = []string{"post", "PUT", "PATCH", "GET"}[r.IntN(4)]
	}
	if r.IntN(3) == 0 {
		req.Query = phptest.GenQuery(r)
		if r.IntN(10) == 0 {
			req.Query = "&&" + strings.Repeat("q=1&&", 1005)
		}
	}
	if r.IntN(2) == 0 {
		req.CT = genURLEncodedCT[r.IntN(len(genURLEncodedCT))]
		req.Body = []byte(genURLEncoded(r))
	} else {
		var body []byte
		req.CT, body = genMultipart(r)
		req.Body = body
	}
	return req
}

// TestBodiesMatchPHPCGI is the differential test: a few hundred generated
// requests (HOOKONCE_ORACLE_N for more) through php-cgi and Request.
func TestBodiesMatchPHPCGI(t *testing.T) {
	n := 400
	if s := os.Getenv("HOOKONCE_ORACLE_N"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			t.Fatalf("HOOKONCE_ORACLE_N=%q: %v", s, err)
		}
	}
	r := rand.New(rand.NewPCG(7, 8))
	reqs := make([]phpCGIRequest, n)
	for i := range reqs {
		reqs[i] = genBodyRequest(r)
	}
	fromPHP := runPHPCGI(t, reqs)
	refused, failed := 0, 0
	for i, req := range reqs {
		ref, diffs := compareWithPHP(req, fromPHP[i])
		if ref {
			refused++
		}
		if len(diffs) > 0 {
			if failed++; failed <= 15 {
				t.Errorf("request %d: %s %q query %.80q body %.300q:\n  %s", i, req.Method, req.CT, req.Query, req.Body, strings.Join(diffs, "\n  "))
			}
		}
	}
	t.Logf("%d requests, %d disagree with php-cgi, %d refused as unreadable", n, failed, refused)
}
