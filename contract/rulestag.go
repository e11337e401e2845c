package contract

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
)

// RulesTag is a short fingerprint of the sender's rules that decide what
// a delivery comes to: its match, key, hash, ignore, success rule, final
// statuses and the policies for a changed payload, a missing key and the
// shapes forwarded without dedupe, and whether a signature is checked. It
// leaves out what only tunes a delivery (timeouts, mode, stored bodies,
// headers): switching a ready sender to mode: enforce is no new rules.
// The traffic counters carry it, so the report counts from the last
// change of a sender's rules (dedupe/readiness). It never depends on a
// secret's value nor on a pointer's address: the same file compiles to
// the same tag in every process.
func (s *Sender) RulesTag() string {
	var b strings.Builder
	rulesText(&b, reflect.ValueOf(struct {
		Methods        []string
		Path           string
		When           []Condition
		Keys           []KeyPart
		Hash           HashMode
		Ignore         []string
		Success        *Success
		FinalStatuses  StatusSet
		ChangedPayload ChangedPolicy
		MissingKey     MissingKeyPolicy
		NoDedupe       []NoDedupeShape
		Signed         bool
	}{s.Methods, s.Path, s.When, s.Keys, s.Hash, s.Ignore, s.Success, s.FinalStatuses, s.ChangedPayload, s.MissingKey, s.NoDedupe, s.HasSignature()}))
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:4])
}

var regexpType = reflect.TypeOf((*regexp.Regexp)(nil))

// rulesText writes v as text that depends on its values only: pointers
// are followed, maps sorted, regular expressions written as their source,
// unexported fields and functions left out.
func rulesText(b *strings.Builder, v reflect.Value) {
	if !v.IsValid() {
		b.WriteString("nil")
		return
	}
	if v.Type() == regexpType {
		if v.IsNil() {
			b.WriteString("nil")
		} else {
			fmt.Fprintf(b, "re(%q)", v.Interface().(*regexp.Regexp).String())
		}
		return
	}
	if v.Kind() == reflect.Struct {
		// A type whose fields are its own (a status set, a template) says
		// what it is through its String method.
		if st, ok := stringer(v); ok {
			fmt.Fprintf(b, "%q", st)
			return
		}
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			b.WriteString("nil")
			return
		}
		rulesText(b, v.Elem())
	case reflect.Struct:
		b.WriteByte('{')
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() || f.Type.Kind() == reflect.Func {
				continue
			}
			b.WriteString(f.Name)
			b.WriteByte(':')
			rulesText(b, v.Field(i))
			b.WriteByte(' ')
		}
		b.WriteByte('}')
	case reflect.Slice, reflect.Array:
		b.WriteByte('[')
		for i := range v.Len() {
			rulesText(b, v.Index(i))
			b.WriteByte(' ')
		}
		b.WriteByte(']')
	case reflect.Map:
		keys := v.MapKeys()
		slices.SortFunc(keys, func(x, y reflect.Value) int { return strings.Compare(fmt.Sprint(x), fmt.Sprint(y)) })
		b.WriteByte('{')
		for _, k := range keys {
			fmt.Fprintf(b, "%v:", k)
			rulesText(b, v.MapIndex(k))
			b.WriteByte(' ')
		}
		b.WriteByte('}')
	case reflect.Func, reflect.Chan, reflect.UnsafePointer:
	default:
		fmt.Fprintf(b, "%q", fmt.Sprint(v.Interface()))
	}
}

func stringer(v reflect.Value) (string, bool) {
	if v.CanInterface() {
		if s, ok := v.Interface().(fmt.Stringer); ok {
			return s.String(), true
		}
	}
	if v.CanAddr() && v.Addr().CanInterface() {
		if s, ok := v.Addr().Interface().(fmt.Stringer); ok {
			return s.String(), true
		}
	}
	p := reflect.New(v.Type())
	p.Elem().Set(v)
	if s, ok := p.Interface().(fmt.Stringer); ok {
		return s.String(), true
	}
	return "", false
}
