package contract

import (
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/tidwall/gjson"
)

// ErrMissingKey is wrapped by Key when a part of the event id is absent.
var ErrMissingKey = errors.New("event id missing")

// KeySource says where a key part is read from.
type KeySource string

const (
	FromHeader KeySource = "header"
	FromBody   KeySource = "body" // a gjson path into a JSON body
	FromQuery  KeySource = "query"
	FromForm   KeySource = "form" // an application/x-www-form-urlencoded field
)

// KeyPart is one part of a sender's event id.
type KeyPart struct {
	Source KeySource
	Name   string // header name, JSON path, query or form field
	// Fallback is tried when Name is absent (a preset's second header).
	Fallback string
}

func (k KeyPart) String() string {
	s := string(k.Source) + " " + k.Name
	if k.Fallback != "" {
		s += " (or " + k.Fallback + ")"
	}
	return s
}

func compileKeyPart(kf keyPartFile) (KeyPart, error) {
	var parts []KeyPart
	if kf.Header != "" {
		parts = append(parts, KeyPart{Source: FromHeader, Name: http.CanonicalHeaderKey(kf.Header)})
	}
	if kf.Body != "" {
		parts = append(parts, KeyPart{Source: FromBody, Name: kf.Body})
	}
	if kf.Query != "" {
		parts = append(parts, KeyPart{Source: FromQuery, Name: kf.Query})
	}
	if kf.Form != "" {
		parts = append(parts, KeyPart{Source: FromForm, Name: kf.Form})
	}
	if len(parts) != 1 {
		return KeyPart{}, errors.New("set exactly one of header, body, query or form")
	}
	return parts[0], nil
}

// Key extracts the event id from a delivery: the parts' values joined with
// ":". An absent part gives an error wrapping ErrMissingKey that names the
// part but quotes nothing from the body.
func (s *Sender) Key(r *http.Request, body []byte) (string, error) {
	vals := make([]string, 0, len(s.Keys))
	var form url.Values
	for _, k := range s.Keys {
		v, err := k.extract(r, body, &form)
		if err != nil {
			return "", err
		}
		vals = append(vals, v)
	}
	return strings.Join(vals, ":"), nil
}

func (k KeyPart) extract(r *http.Request, body []byte, form *url.Values) (string, error) {
	get := func(name string) (string, error) {
		switch k.Source {
		case FromHeader:
			return strings.TrimSpace(r.Header.Get(name)), nil
		case FromQuery:
			return r.URL.Query().Get(name), nil
		case FromForm:
			if *form == nil {
				mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
				if mt != "application/x-www-form-urlencoded" {
					return "", fmt.Errorf("%w: form %s: body is not application/x-www-form-urlencoded", ErrMissingKey, name)
				}
				f, err := url.ParseQuery(string(body))
				if err != nil {
					return "", fmt.Errorf("%w: form %s: body is not a valid form", ErrMissingKey, name)
				}
				*form = f
			}
			return form.Get(name), nil
		case FromBody:
			if !gjson.ValidBytes(body) {
				return "", fmt.Errorf("%w: body %s: body is not JSON", ErrMissingKey, name)
			}
			res := gjson.GetBytes(body, name)
			switch res.Type {
			case gjson.String:
				return res.Str, nil
			case gjson.Number:
				return res.Raw, nil // as written: 1e3 stays 1e3
			case gjson.Null:
				return "", nil
			default:
				if !res.Exists() {
					return "", nil
				}
				return "", fmt.Errorf("%w: body %s: not a string or number", ErrMissingKey, name)
			}
		}
		return "", fmt.Errorf("unknown key source %q", k.Source)
	}
	v, err := get(k.Name)
	if err == nil && v == "" && k.Fallback != "" {
		v, err = get(k.Fallback)
	}
	if err != nil {
		return "", err
	}
	if v == "" {
		return "", fmt.Errorf("%w: %s absent or empty", ErrMissingKey, k)
	}
	if len(v) > 512 {
		return "", fmt.Errorf("%w: %s longer than 512 bytes", ErrMissingKey, k)
	}
	return v, nil
}
