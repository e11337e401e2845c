package contract

import (
	"errors"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/hookonce/hookonce/contract/internal/php"
)

// One regression test per hole found by comparing hookonce with PHP 8.2 by
// hand. Each expected $_POST was read from php-cgi, and
// TestBodyRegressionsMatchPHPCGI re-reads it there; nil means Unreadable
// must refuse the body.

type bodyRegression struct {
	name string
	req  phpCGIRequest
	post map[string]any // nil: refused as unreadable
	get  map[string]any // checked when not nil
}

func mp(nl string, parts ...string) []byte {
	var b strings.Builder
	for _, p := range parts {
		b.WriteString("--BB" + nl + p + nl)
	}
	b.WriteString("--BB--" + nl)
	return []byte(b.String())
}

func field(name, val string) string {
	return `Content-Disposition: form-data; name="` + name + "\"\r\n\r\n" + val
}

func manyFields(n int, prefix string) []string {
	var out []string
	for i := range n {
		out = append(out, field(prefix+strconv.Itoa(i), "1"))
	}
	return out
}

func pairs(n int, sep string) string {
	var b strings.Builder
	for i := range n {
		b.WriteString("f" + strconv.Itoa(i) + "=1" + sep)
	}
	return b.String()
}

const (
	ctForm = "application/x-www-form-urlencoded"
	ctMP   = "multipart/form-data; boundary=BB"
)

func bodyRegressions() []bodyRegression {
	post := func(ct, body string) phpCGIRequest { return phpCGIRequest{Method: "POST", CT: ct, Body: []byte(body)} }
	mpost := func(ct string, parts ...string) phpCGIRequest {
		return phpCGIRequest{Method: "POST", CT: ct, Body: mp("\r\n", parts...)}
	}
	one := map[string]any{"id": "1"}
	empty := map[string]any{}
	fileF := "Content-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\n\r\nDATA"
	var files []string
	for i := range 20 {
		files = append(files, strings.Replace(fileF, `"file"`, `"file`+strconv.Itoa(i)+`"`, 1))
	}
	fields1000 := map[string]any{}
	for i := range 1000 {
		fields1000["p"+strconv.Itoa(i)] = "1"
	}
	fields1001 := map[string]any{}
	for i := range 1001 {
		fields1001["f"+strconv.Itoa(i)] = "1"
	}
	fields1000f := map[string]any{}
	for i := range 1000 {
		fields1000f["f"+strconv.Itoa(i)] = "1"
	}
	return []bodyRegression{
		{"ContentTypeCommaList", post(ctForm+", text/plain", "id=1"), one, nil},
		{"ContentTypeSpaceBeforeParam", post(ctForm+" ;charset=UTF-8", "id=1"), one, nil},
		{"ContentTypeUpperCase", post("Application/X-WWW-Form-Urlencoded;x", "id=1"), one, nil},
		{"ContentTypeTabIsNotACut", post(ctForm+"\t;x", "id=1"), empty, nil},
		{"ContentTypeSuffix", post(ctForm+"x", "id=1"), empty, nil},
		{"MultipartBoundaryInsideOtherParam", phpCGIRequest{Method: "POST", CT: "multipart/form-data; xboundary=BB; boundary=CC",
			Body: mp("\r\n", field("id", "1"))}, one, nil},
		{"MultipartDuplicateBoundaryFirst", phpCGIRequest{Method: "POST", CT: "multipart/form-data; boundary=BB; boundary=CC",
			Body: mp("\r\n", field("id", "1"))}, one, nil},
		{"MultipartBoundaryParamUpperCase", mpost("multipart/form-data; BOUNDARY=BB", field("id", "1")), one, nil},
		{"MultipartBoundaryQuoted", mpost(`multipart/form-data; boundary="BB"; x=1`, field("id", "1")), one, nil},
		{"MultipartBoundaryAfterComma", mpost("multipart/form-data,boundary=BB", field("id", "1")), one, nil},
		{"MultipartBoundarySpacedEquals", mpost("multipart/form-data; boundary = BB", field("id", "1")), empty, nil},
		{"MultipartNoBoundary", mpost("multipart/form-data", field("id", "1")), empty, nil},
		{"MultipartEmptyFilenameIsFile", mpost(ctMP, "Content-Disposition: form-data; name=\"id\"; filename=\"\"\r\n\r\nX", field("b", "2")),
			map[string]any{"b": "2"}, nil},
		{"MultipartFilenameStarIsField", mpost(ctMP, "Content-Disposition: form-data; name=\"id\"; filename*=UTF-8''a.txt\r\n\r\n1"), one, nil},
		{"MultipartTwoNamesLastWins", mpost(ctMP, "Content-Disposition: form-data; name=\"x\"; name=\"id\"\r\n\r\n1"), one, nil},
		{"MultipartAttachmentIsField", mpost(ctMP, "Content-Disposition: attachment; name=id\r\n\r\n1"), one, nil},
		{"MultipartQuotedPrintableNotDecoded", mpost(ctMP, "Content-Disposition: form-data; name=\"id\"\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n=41=\r\nb"),
			map[string]any{"id": "=41=\r\nb"}, nil},
		{"MultipartPreamble", phpCGIRequest{Method: "POST", CT: ctMP, Body: append([]byte("junk\r\n--BBx\r\n"), mp("\r\n", field("id", "1"))...)}, one, nil},
		{"MultipartNoFinalBoundary", phpCGIRequest{Method: "POST", CT: ctMP, Body: []byte("--BB\r\n" + field("id", "1") + "\r\n")}, one, nil},
		{"MultipartLFOnly", phpCGIRequest{Method: "POST", CT: ctMP, Body: mp("\n", "Content-Disposition: form-data; name=\"id\"\n\n1")}, one, nil},
		{"MultipartHeaderContinuation", mpost(ctMP, "Content-Disposition: form-data;\r\n name=\"id\"\r\n\r\n1"), one, nil},
		{"MultipartHeaderNameCase", mpost(ctMP, "content-DISPOSITION: form-data; NAME=\"id\"\r\n\r\n1"), one, nil},
		{"MultipartHeaderNameSpaceBeforeColon", mpost(ctMP, "Content-Disposition : form-data; name=\"id\"\r\n\r\n1"), empty, nil},
		{"MultipartNoDispositionSkipped", mpost(ctMP, "X-Other: 1\r\n\r\n1", field("id", "1")), one, nil},
		{"MultipartGarbledPartStops", mpost(ctMP, field("id", "1"), "Content-Disposition: form-data\r\n\r\nx", field("b", "2")), one, nil},
		{"MultipartQuoting", mpost(ctMP, "Content-Disposition: form-data; name=\"a\\\"b\\\\c\"\r\n\r\n1",
			"Content-Disposition: form-data; name='d e'\r\n\r\n2", "Content-Disposition: form-data; name=f g\r\n\r\n3"),
			map[string]any{"a\"b\\c": "1", "d_e": "2", "f": "3"}, nil},
		{"MultipartEpilogueBoundary", phpCGIRequest{Method: "POST", CT: ctMP, Body: append(mp("\r\n", field("id", "1")),
			"--BB\r\n"+field("late", "L")+"\r\n"...)}, map[string]any{"id": "1", "late": "L"}, nil},
		{"MultipartBoundarySuffixIsNotABoundary", phpCGIRequest{Method: "POST", CT: ctMP,
			Body: []byte("--BB\r\n" + field("id", "1") + "\r\n--BBx\r\n" + field("b", "2") + "\r\n--BB--\r\n")}, one, nil},
		{"MultipartSkippedUploadDataScanned", mpost(ctMP, "Content-Disposition: form-data; name=\"f\"; filename=\"\"\r\n\r\n--BB\r\n"+field("id", "1")), one, nil},
		{"MultipartMaxInputVars", mpost(ctMP, manyFields(1001, "p")...), fields1000, nil},
		{"MultipartFilesDoNotCountAsVars", mpost(ctMP, append(files, manyFields(1000, "p")...)...), fields1000, nil},
		{"MultipartTooManyFilesRefused", mpost(ctMP, append(append(files, fileF), field("id", "1"))...), nil, nil},
		{"MultipartFieldAfterSameNamedFileRefused", mpost(ctMP, fileF, field("file[tmp_name]", "x")), nil, nil},
		{"MultipartLongHeaderRefused", mpost(ctMP, "Content-Disposition: form-data; name=\"id\"\r\nX-Long: "+strings.Repeat("x", 5000)+"\r\n\r\n1"), nil, nil},
		{"URLEncodedEmptyPairsCount", post(ctForm, "&"+pairs(1001, "&")), fields1000f, nil},
		{"URLEncoded1001stRegistered", post(ctForm, pairs(1001, "&")), fields1001, nil},
		{"QueryEmptyPairsSkipped", phpCGIRequest{Method: "GET", Query: "&&&" + pairs(1001, "&&")}, empty, fields1000f},
		{"BracketWhitespaceAppends", post(ctForm, "a[+]=1&a[%09]=2&a[%0B]=3&b[+x]=4&c[++]=5&d[x][%0A]=6"),
			map[string]any{"a": map[string]any{"0": "1", "1": "2", "2": "3"}, "b": map[string]any{" x": "4"},
				"c": map[string]any{"  ": "5"}, "d": map[string]any{"x": map[string]any{"0": "6"}}}, nil},
		{"MethodLowerCasePost", phpCGIRequest{Method: "post", CT: ctForm, Body: []byte("id=1")}, empty, nil},
		{"MethodPUT", phpCGIRequest{Method: "PUT", CT: ctForm, Body: []byte("id=1")}, empty, nil},
		{"MethodPATCHMultipart", phpCGIRequest{Method: "PATCH", CT: ctMP, Body: mp("\r\n", field("id", "1"))}, empty, nil},
	}
}

func TestBodyRegressions(t *testing.T) {
	for _, c := range bodyRegressions() {
		t.Run(c.name, func(t *testing.T) {
			req := c.req.request()
			err := req.Unreadable()
			if c.post == nil {
				if !errors.Is(err, ErrUnreadableBody) {
					t.Fatalf("Unreadable = %v, want ErrUnreadableBody", err)
				}
				if _, _, ferr := req.Value(FromForm, "id"); !errors.Is(ferr, ErrUnreadableBody) {
					t.Fatalf("Value(form) error = %v, want ErrUnreadableBody", ferr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Unreadable = %v", err)
			}
			var got any = map[string]any{}
			if f, err := req.Form(); err == nil {
				got = php.Plain(f)
			} else if !errors.Is(err, errNotForm) {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, any(c.post)) {
				t.Fatalf("$_POST:\n got %.300v\nwant %.300v", got, c.post)
			}
			if c.get != nil {
				if got := php.Plain(req.queryVars()); !reflect.DeepEqual(got, any(c.get)) {
					t.Fatalf("$_GET:\n got %.300v\nwant %.300v", got, c.get)
				}
			}
		})
	}
}

// TestBodyRegressionsMatchPHPCGI: the expectations above are PHP's own.
func TestBodyRegressionsMatchPHPCGI(t *testing.T) {
	cases := bodyRegressions()
	reqs := make([]phpCGIRequest, len(cases))
	for i, c := range cases {
		reqs[i] = c.req
	}
	fromPHP := runPHPCGI(t, reqs)
	for i, c := range cases {
		if c.post != nil && !reflect.DeepEqual(fromPHP[i].Post, any(c.post)) {
			t.Errorf("%s: php-cgi $_POST %.300v, want %.300v", c.name, fromPHP[i].Post, c.post)
		}
		if c.get != nil && !reflect.DeepEqual(fromPHP[i].Get, any(c.get)) {
			t.Errorf("%s: php-cgi $_GET %.300v, want %.300v", c.name, fromPHP[i].Get, c.get)
		}
	}
}

func TestDuplicateContentType(t *testing.T) {
	req := &Request{Method: http.MethodPost, Header: http.Header{"Content-Type": {"application/json", ctForm}}, Body: []byte("id=1")}
	if err := req.Unreadable(); !errors.Is(err, ErrUnreadableBody) {
		t.Fatalf("form among two Content-Types: Unreadable = %v", err)
	}
	req = &Request{Method: http.MethodPost, Header: http.Header{"Content-Type": {"application/json", "text/plain"}}, Body: []byte("{}")}
	if err := req.Unreadable(); err != nil {
		t.Fatalf("no form among two Content-Types: Unreadable = %v", err)
	}
	req = &Request{Method: http.MethodPut, Header: http.Header{"Content-Type": {ctForm, ctForm}}, Body: []byte("id=1")}
	if err := req.Unreadable(); err != nil {
		t.Fatalf("PUT: Unreadable = %v (PHP parses no form)", err)
	}
}

func TestUnreadableNeverQuotesBody(t *testing.T) {
	secret := "SECRETVALUE"
	req := phpCGIRequest{Method: "POST", CT: ctMP, Body: mp("\r\n", "Content-Disposition: form-data; name=\"id\"\r\nX: "+secret+strings.Repeat("y", 5000)+"\r\n\r\n"+secret)}.request()
	err := req.Unreadable()
	if err == nil || strings.Contains(err.Error(), secret) {
		t.Fatalf("Unreadable = %v", err)
	}
}

// BenchmarkUnreadableJSON: Unreadable does no parsing for a JSON body.
func BenchmarkUnreadableJSON(b *testing.B) {
	req := &Request{Method: http.MethodPost, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"id":1}`)}
	for b.Loop() {
		if req.Unreadable() != nil {
			b.Fatal("refused")
		}
	}
}
