package php

import (
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// A JSON body is read where it lies: validated once without building
// anything (as PHP's json_decode would accept it), and then only the
// configured paths are walked, keeping the last of repeated object keys
// as json_decode does. No request body is ever decoded into maps on the
// way to the signature check: an unsigned megabyte of [0,0,0,…] costs a
// scan, not tens of megabytes (trap 30 in ARCHITECTURE.md).

// phpJSONMaxDepth is the deepest nesting of arrays and objects PHP's
// json_decode accepts at its default depth (512): 511 containers.
const phpJSONMaxDepth = 511

// ValidJSON reports whether PHP's json_decode would decode b: valid
// UTF-8 and JSON, nested at most phpJSONMaxDepth deep, and no \u escape
// that is half of a surrogate pair (json_decode fails on those where Go
// would put U+FFFD).
func ValidJSON(b []byte) bool {
	if !utf8.Valid(b) || !gjson.ValidBytes(b) {
		return false
	}
	depth := 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '[', '{':
			if depth++; depth > phpJSONMaxDepth {
				return false
			}
		case ']', '}':
			depth--
		case '"':
			// The document is valid: the string ends at the first
			// unescaped quote.
			for i++; b[i] != '"'; i++ {
				if b[i] != '\\' {
					continue
				}
				i++
				if b[i] != 'u' {
					continue
				}
				r := hex4(b[i+1 : i+5])
				i += 4
				switch {
				case r >= 0xDC00 && r <= 0xDFFF:
					return false // a low half with no high half before it
				case r >= 0xD800 && r <= 0xDBFF:
					if i+6 >= len(b) || b[i+1] != '\\' || b[i+2] != 'u' {
						return false
					}
					if lo := hex4(b[i+3 : i+7]); lo < 0xDC00 || lo > 0xDFFF {
						return false
					}
					i += 6
				}
			}
		}
	}
	return true
}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b {
		r = r<<4 | rune(unhex(c))
	}
	return r
}
