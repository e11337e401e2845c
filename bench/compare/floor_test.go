//go:build benchcompare

package main

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestSubstituteWholeTokens(t *testing.T) {
	lits := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}
	got, err := substitute("$1 $10 $2::text $1", lits, map[int]string{2: ":k"})
	if err != nil || got != "a j :k::text a" {
		t.Fatalf("got %q, %v", got, err)
	}
	if _, err := substitute("$3", lits[:2], nil); err == nil {
		t.Fatal("a parameter without a value passed")
	}
}

func TestSQLTextHasNoPgbenchVariables(t *testing.T) {
	got := sqlText(`{"at":"12:34"} it's \x`)
	if want := `E'{"at"\x3a"12\x3a34"} it''s \\x'`; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	if err := checkPgbenchVars("SELECT "+got+"::jsonb", "k"); err != nil {
		t.Fatal(err)
	}
	if err := checkPgbenchVars(`SELECT '{"a":1}'::jsonb, :k`, "k"); err == nil {
		t.Fatal(`"a":1 in a literal passed; pgbench reads :1 as a variable`)
	}
}

// The script holds both statements with every parameter replaced, the
// values of the sample as literals, and no variable but :k and :o.
func TestFloorScript(t *testing.T) {
	ev := eventSample{hash: "h:1", lease: 30 * time.Second, ttl: 72 * time.Hour,
		status: 200, respHeaders: jsonBytes(`{"Content-Type": ["application/json"]}`), respBody: []byte(`{"ok":true}`),
		attempt: `{"at": "2026-01-02T03:04:05Z", "by": "sender"}`}
	script, err := floorScript("pgbench", ev)
	if err != nil {
		t.Fatal(err)
	}
	if regexp.MustCompile(`\$[0-9]`).MatchString(script) {
		t.Fatalf("a parameter left in:\n%s", script)
	}
	for _, want := range []string{`\set k random(`, `\set o random(`, "INSERT INTO hookonce_records", "UPDATE hookonce_records",
		"30000000::bigint", "259200000000::bigint", "NULL::bytea", "NULL::jsonb", `E'h\x3a1'::text`,
		`resp_status = 200`, `resp_body = E'\\x7b226f6b223a747275657d'`, `E'{"Content-Type"\x3a ["application/json"]}'::jsonb`,
		"key = :k AND owner = :o"} {
		if !strings.Contains(script, want) {
			t.Errorf("script lacks %s:\n%s", want, script)
		}
	}
	if n := strings.Count(script, ";\n"); n != 2 {
		t.Errorf("%d statements, want 2", n)
	}
}
