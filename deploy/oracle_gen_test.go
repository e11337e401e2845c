package deploy_test

// The request generator of the differential oracle (oracle_test.go): path
// spellings, methods, content types, urlencoded and multipart shapes,
// duplicate and bracket names, padding past max_input_vars, Connection
// lists and client-address headers — the places where a person comparing
// hookonce with PHP by hand found holes, and their neighbours.

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// oracleCase is one generated request, written to the wire as it is.
type oracleCase struct {
	id      string
	from    string // 127.0.0.1: a trusted proxy to hookonce; 127.0.0.3: not
	method  string
	target  string
	headers [][2]string // in order; Host, Connection: close and the id are added
	conn    []string    // names added to the Connection header
	body    string
	chunks  int    // > 0: the body is sent chunked (Transfer-Encoding), in about that many chunks
	what    string // what the generator chose, for the report
}

// The oracle site's scripts: sender paths, the scripts they own, and
// decoys next to them.
var (
	oracleOwned = map[string]string{ // script (docroot-relative) → route path
		"hooks/pay.php":                   "/hooks/pay.php",
		"webhooks/payment/index.php":      "/webhooks/payment",
		"bitrix/tools/sale_ps_result.php": "/bitrix/tools/sale_ps_result.php",
		"api/webhooks/x.php":              "/api/webhooks/*",
		"api/webhooks/sub/index.php":      "/api/webhooks/*",
	}
	oracleDecoys = []string{
		"index.php", "hooks/other.php", "hooks/index.php", "webhooks/index.php",
		"webhooks/payment.php", "bitrix/urlrewrite.php", "bitrix/tools/index.php", "api/x.php",
	}
	// base paths the generator spells: every owned path in the forms a
	// sender would use, and the decoys.
	oracleBases = []string{
		"/hooks/pay.php", "/webhooks/payment", "/webhooks/payment/", "/webhooks/payment/index.php",
		"/bitrix/tools/sale_ps_result.php", "/api/webhooks/x.php", "/api/webhooks/sub/",
		"/api/webhooks/sub/index.php", "/api/webhooks",
		"/index.php", "/", "/hooks/other.php", "/hooks/", "/webhooks/", "/webhooks/payment.php",
		"/webhooks/payment/x", "/bitrix/tools/", "/api/x.php", "/catalog/item",
		// what Apache's MultiViews turns into a script
		"/hooks/pay", "/bitrix/tools/sale_ps_result", "/webhooks/payment/index",
	}
	// oracleKeyHeaders are the headers keys and signatures read: compared
	// by the name PHP reads them under.
	oracleKeyHeaders = []string{"X-Event-Id", "X-Signature"}
)

// oracleConfig runs every sender in shadow mode, with unmatched: pass, so
// that every request reaches PHP and what PHP saw can be compared with
// what hookonce judged.
const oracleConfig = `
trusted_proxies: [127.0.0.1]
senders:
  - name: pay
    mode: shadow
    match: { path: /hooks/pay.php, when: [ { request: SHP_HANDLER, equals: ROBOX } ] }
    key: [ { request: InvId } ]
  - name: payment
    mode: shadow
    match: { path: /webhooks/payment }
    key: [ { form: "data[FIELDS][ID]" }, { header: X-Event-Id } ]
  - name: yookassa
    mode: shadow
    match: { path: /bitrix/tools/sale_ps_result.php }
    key: [ { body: object.id } ]
  - name: api
    mode: shadow
    match: { path: "/api/webhooks/*" }
    key: [ { query: id } ]
paths:
  /hooks/pay.php: { unmatched: pass }
  /webhooks/payment: { unmatched: pass }
  /bitrix/tools/sale_ps_result.php: { unmatched: pass }
  "/api/webhooks/*": { unmatched: pass }
`

// oracleFrontPaths are the front nginx's webhook locations for those senders.
var oracleFrontPaths = []string{"/hooks/pay.php", "/webhooks/payment", "/bitrix/tools/sale_ps_result.php", "/api/webhooks"}

type gen struct{ r *rand.Rand }

func (g gen) pick(xs ...string) string { return xs[g.r.IntN(len(xs))] }
func (g gen) chance(p float64) bool    { return g.r.Float64() < p }

// spell changes a path into another spelling of it, or of a neighbour.
func (g gen) spell(p string) (string, string) {
	var what []string
	for range g.r.IntN(4) {
		segs := strings.Split(p, "/")
		i := 1 + g.r.IntN(max(1, len(segs)-1))
		switch g.r.IntN(11) {
		case 0: // one byte escaped, %XX in either case
			if j := g.r.IntN(len(p)); p[j] != '%' {
				esc := fmt.Sprintf("%%%02X", p[j])
				if g.chance(0.5) {
					esc = strings.ToLower(esc)
				}
				p = p[:j] + esc + p[j+1:]
				what = append(what, "escape")
			}
		case 1:
			segs = append(segs[:i], append([]string{""}, segs[i:]...)...)
			p, what = strings.Join(segs, "/"), append(what, "//")
		case 2:
			segs = append(segs[:i], append([]string{"."}, segs[i:]...)...)
			p, what = strings.Join(segs, "/"), append(what, "/./")
		case 3:
			segs = append(segs[:i], append([]string{"zz", ".."}, segs[i:]...)...)
			p, what = strings.Join(segs, "/"), append(what, "/zz/../")
		case 4:
			p, what = p+"/", append(what, "trailing /")
		case 5:
			p, what = p+g.pick("/x", "/y.php/z", "/index.php", "/index.php/x", "/%69ndex.php", "/a%2Fb"), append(what, "suffix")
		case 6:
			p, what = p+g.pick("index.php", ".php", "/INDEX.php", ";x=1", "%20", ".PHP"), append(what, "tail")
		case 7:
			p, what = strings.Replace(p, "/", g.pick("//", "/%2F", "/./"), 1), append(what, "head")
		case 8:
			p, what = p+g.pick("%00", "/../..", "%2"), append(what, "malformed")
		case 9:
			p, what = strings.Replace(p, ".php", g.pick("%2ephp", ".ph%70", ".php/"), 1), append(what, "ext")
		case 10:
			p, what = strings.Replace(p, "index.php", g.pick("%69ndex.php", "./index.php", "index.php/"), 1), append(what, "index")
		}
	}
	return p, strings.Join(what, ",")
}

var oracleNames = []string{
	"InvId", "InvId", "SHP_HANDLER", "id", "data[FIELDS][ID]", "data[FIELDS][ID]", "OutSum",
	"a[b]", "a[ ]", "a[]", "a[  ]", "a[\t]", "a[ x]", "x.y", " InvId", "InvId[", "a[b", "data[FIELDS] [ID]",
	"data[FIELDS][ID", "Inv Id", "Inv.Id", "[x]", "a[b]c", "a]b", "%49nvId", "InvId%00x",
}

func (g gen) value() string {
	switch g.r.IntN(7) {
	case 0:
		return ""
	case 1:
		return g.pick("ROBOX", "ROBOX", "robox", "ROBOX%20", "%52OBOX", "RO+BOX")
	case 2:
		return fmt.Sprintf("%d", g.r.IntN(1000))
	case 3:
		return g.pick("%FF", "%E2%82%AC", "a%3Db", "a%26b", "%", "%G1", "+", "%2B")
	default:
		return fmt.Sprintf("v%d", g.r.IntN(100))
	}
}

// pairs is an urlencoded string of a few fields, empty pairs sometimes.
func (g gen) pairs(n int) string {
	var ps []string
	for range n {
		name := g.pick(oracleNames...)
		switch {
		case g.chance(0.08):
			ps = append(ps, "")
		case g.chance(0.08):
			ps = append(ps, name)
		default:
			ps = append(ps, name+"="+g.value())
		}
	}
	return strings.Join(ps, "&")
}

// padded is a form of n filler fields around the real ones: the
// max_input_vars edge.
func (g gen) padded() string {
	n := 990 + g.r.IntN(20)
	var ps []string
	for i := range n {
		if g.chance(0.02) {
			ps = append(ps, "")
			continue
		}
		ps = append(ps, fmt.Sprintf("f%d=%d", i, i))
	}
	real := []string{"SHP_HANDLER=ROBOX", "InvId=" + fmt.Sprint(g.r.IntN(99)), "data[FIELDS][ID]=" + fmt.Sprint(g.r.IntN(99))}
	if g.chance(0.5) {
		return strings.Join(append(ps, real...), "&")
	}
	return strings.Join(append(real, ps...), "&")
}

var oracleCTForm = []string{
	"application/x-www-form-urlencoded", "application/x-www-form-urlencoded; charset=UTF-8",
	"APPLICATION/X-WWW-FORM-URLENCODED", "application/x-www-form-urlencoded, text/plain",
	"application/x-www-form-urlencoded ;charset=x", "application/x-www-form-urlencoded;charset=x",
	"application/x-www-form-urlencodedx", "application/x-www-form", "text/plain",
	"application/x-www-form-urlencoded,", "application/json",
}

// multipart builds a multipart body and its Content-Type.
func (g gen) multipart() (ct, body, what string) {
	b := "B" + fmt.Sprint(g.r.IntN(1000))
	var ctv string
	switch g.r.IntN(8) {
	case 0:
		ctv = "multipart/form-data; boundary=" + b
	case 1:
		ctv = `multipart/form-data; boundary="` + b + `"`
	case 2:
		ctv = "multipart/form-data; xboundary=" + b + "; boundary=OTHER"
	case 3:
		ctv = "multipart/form-data; boundary=" + b + "; boundary=OTHER"
	case 4:
		ctv = "Multipart/Form-Data;boundary=" + b
	case 5:
		ctv = "multipart/form-data; boundary=" + b + ", text/plain"
	case 6:
		ctv = "multipart/form-data; charset=utf-8; boundary=" + b
	default:
		ctv = "multipart/form-data; BOUNDARY=" + b
	}
	var sb strings.Builder
	var w []string
	if g.chance(0.1) {
		sb.WriteString("preamble\r\n")
		w = append(w, "preamble")
	}
	for range 1 + g.r.IntN(4) {
		sb.WriteString("--" + b + "\r\n")
		name := g.pick(oracleNames...)
		disp := g.pick("form-data", "form-data", "form-data", "attachment", "inline", "FORM-DATA")
		params := `; name="` + name + `"`
		switch g.r.IntN(9) {
		case 0:
			params += `; filename=""`
			w = append(w, `filename=""`)
		case 1:
			params += `; filename*=UTF-8''x.txt`
			w = append(w, "filename*")
		case 2:
			params = `; name="decoy"` + params
			w = append(w, "two names")
		case 3:
			params += `; filename="a.txt"`
			w = append(w, "file")
		case 4:
			params = "; name=" + strings.ReplaceAll(name, " ", "")
			w = append(w, "unquoted")
		case 5:
			params = ""
			w = append(w, "no name")
		}
		fmt.Fprintf(&sb, "%s: %s%s\r\n", g.pick("Content-Disposition", "content-disposition"), disp, params)
		val := g.value()
		if g.chance(0.15) {
			sb.WriteString("Content-Transfer-Encoding: quoted-printable\r\n")
			val = "=31=32"
			w = append(w, "qp")
		}
		sb.WriteString("\r\n" + val + "\r\n")
	}
	if g.chance(0.9) {
		sb.WriteString("--" + b + "--\r\n")
	} else {
		w = append(w, "no end")
	}
	return ctv, sb.String(), strings.Join(w, ",")
}

var oracleAddrHeaders = []string{
	"Client-IP", "Client_IP", "X-Forwarded-For", "X-Real-IP", "Forwarded", "X-Forwarded",
	"Forwarded-For", "X-Originating-IP", "X-Remote-IP", "X-Remote-Addr", "X-Cluster-Client-IP",
	"True-Client-IP", "CF-Connecting-IP", "X-Client-IP",
}

// spellHeader spells a header name as a sender, a proxy or an attacker
// may: case, "_" for "-", mixed.
func (g gen) spellHeader(h string) string {
	switch g.r.IntN(6) {
	case 0:
		return strings.ToLower(h)
	case 1:
		return strings.ToUpper(h)
	case 2:
		return strings.ReplaceAll(h, "-", "_")
	case 3:
		return strings.ToLower(strings.ReplaceAll(h, "-", "_"))
	case 4:
		return strings.Replace(h, "-", "_", 1)
	}
	return h
}

// next generates case i.
func (g gen) next(i int) oracleCase {
	c := oracleCase{id: fmt.Sprintf("o%d", i), from: g.pick("127.0.0.1", "127.0.0.3")}
	base := g.pick(oracleBases...)
	var spellWhat string
	c.target, spellWhat = g.spell(base)
	what := []string{base + "→" + spellWhat}
	c.method = g.pick("POST", "POST", "POST", "POST", "GET", "PUT", "post", "PATCH")
	if g.chance(0.6) {
		c.target += "?" + g.pairs(1+g.r.IntN(4))
		what = append(what, "query")
	}
	switch k := g.r.IntN(10); {
	case k < 4:
		ct := g.pick(oracleCTForm...)
		c.headers = append(c.headers, [2]string{"Content-Type", ct})
		if g.chance(0.15) {
			c.body = g.padded()
			what = append(what, "padded form")
		} else {
			c.body = g.pairs(1 + g.r.IntN(6))
			what = append(what, "form")
		}
	case k < 7:
		ct, body, w := g.multipart()
		c.headers = append(c.headers, [2]string{"Content-Type", ct})
		c.body = body
		what = append(what, "multipart("+w+")")
	case k < 9:
		c.headers = append(c.headers, [2]string{"Content-Type", g.pick("application/json", "text/plain", "application/json; charset=utf-8")})
		c.body = g.pick(`{"object":{"id":"p1"}}`, `{"object":{"id":"p1","id":"p2"}}`, `{"object":{"id":12}}`,
			`{"object":{"id":1.0}}`, `{"object":{"id":"p\u0031"}}`, `{"object":{}}`, `[1]`, `{"object":{"id":true}}`)
		what = append(what, "json")
	default:
		what = append(what, "no body")
	}
	if g.chance(0.15) { // a second Content-Type
		c.headers = append(c.headers, [2]string{"Content-Type", g.pick(oracleCTForm...)})
		what = append(what, "two content types")
	}
	for range g.r.IntN(3) {
		c.headers = append(c.headers, [2]string{"X-Event-Id", "e" + fmt.Sprint(g.r.IntN(9))})
	}
	if g.chance(0.35) {
		var w []string
		for range 1 + g.r.IntN(3) {
			name := g.spellHeader(g.pick(oracleKeyHeaders...))
			val := g.pick("e", "s") + fmt.Sprint(g.r.IntN(9))
			if g.chance(0.08) { // obs-fold: a continuation line
				val += "\r\n " + g.pick("x", "e7", "")
				w = append(w, "obs-fold")
			}
			c.headers = append(c.headers, [2]string{name, val})
			w = append(w, name)
		}
		what = append(what, "headers "+strings.Join(w, ","))
	}
	if g.chance(0.1) {
		var ck []string
		for range 1 + g.r.IntN(2) {
			ck = append(ck, g.pick("InvId", "SHP_HANDLER", "id", "data[FIELDS][ID]", "sess", "Inv.Id")+"="+g.value())
		}
		c.headers = append(c.headers, [2]string{"Cookie", strings.Join(ck, "; ")})
		what = append(what, "cookie")
	}
	if c.body != "" && g.chance(0.15) {
		c.chunks = 1 + g.r.IntN(3)
		what = append(what, "chunked")
	}
	if g.chance(0.3) {
		for range 1 + g.r.IntN(3) {
			c.headers = append(c.headers, [2]string{g.pick(oracleAddrHeaders...), fmt.Sprintf("203.0.113.%d", 1+g.r.IntN(200))})
		}
		what = append(what, "address headers")
	}
	if g.chance(0.2) {
		c.conn = append(c.conn, g.pick("X-Event-Id", "Content-Type", "X-Real-IP", "X-Forwarded-For", "Client-IP", "Keep-Alive", "Content-Length"))
		what = append(what, "Connection: "+strings.Join(c.conn, ","))
	}
	c.what = strings.Join(what, "; ")
	return c
}
