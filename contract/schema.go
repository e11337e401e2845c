package contract

import (
	"regexp"

	"go.yaml.in/yaml/v3"
)

// The schema: the config file as the operator writes it, decoded from
// YAML as is (nil: not set here). compile.go turns it into a Contract.

// policyFile holds the settings a sender may inherit from defaults. Nil
// means "not set here".
type policyFile struct {
	TTL              *Duration `yaml:"ttl"`
	Lease            *Duration `yaml:"lease"`
	UpstreamTimeout  *Duration `yaml:"upstream_timeout"`
	StoreTimeout     *Duration `yaml:"store_timeout"`
	MaxStoredBody    *Size     `yaml:"max_stored_body"`
	StoreRequestBody *bool     `yaml:"store_request_body"`
	RetryWindow      *Duration `yaml:"retry_window"`
	InProgress       *string   `yaml:"in_progress"`
	WaitTimeout      *Duration `yaml:"wait_timeout"`
	MissingKey       *string   `yaml:"missing_key"`
	OnStoreError     *string   `yaml:"on_store_error"`
	ForwardKeyHeader *string   `yaml:"forward_key_header"`
	Hash             *string   `yaml:"hash"`
	Ignore           []string  `yaml:"ignore"`
	Conflict         *struct {
		Status *int    `yaml:"status"`
		Body   *string `yaml:"body"`
	} `yaml:"conflict"`
	Ambiguous            *string  `yaml:"ambiguous"`
	Mode                 *string  `yaml:"mode"`
	Duplicate            *string  `yaml:"duplicate"`
	FinalStatuses        *string  `yaml:"final_statuses"`
	StripResponseHeaders []string `yaml:"strip_response_headers"`
	// Durable acceptance (ack.go).
	Ack        *string        `yaml:"ack"`
	AckAfter   *Duration      `yaml:"ack_after"`
	RetryFor   *Duration      `yaml:"retry_for"`
	AckAnswer  *ackAnswerFile `yaml:"ack_answer"`
	AckBacklog *int           `yaml:"ack_backlog"`
}

type matchFile struct {
	Method string          `yaml:"method"`
	Path   string          `yaml:"path"`
	When   []conditionFile `yaml:"when"`
}

type pathFile struct {
	Unmatched string `yaml:"unmatched"`
}

type keyPartFile struct {
	Header  string `yaml:"header"`
	Body    string `yaml:"body"`
	Query   string `yaml:"query"`
	Form    string `yaml:"form"`
	Request string `yaml:"request"` // query or form, as Bitrix's $request->get()
}

type senderFile struct {
	Name      string           `yaml:"name"`
	Preset    string           `yaml:"preset"`
	Match     matchFile        `yaml:"match"`
	Key       []keyPartFile    `yaml:"key"`
	Signature *SignatureConfig `yaml:"signature"`
	Success   *successFile     `yaml:"success"`
	Serialize *serializeFile   `yaml:"serialize"`
	// Dedupe: "off" forwards every delivery without dedupe, "on" (the
	// default) undoes a preset's off.
	Dedupe *string `yaml:"dedupe"`
	// NoDedupe: shapes of delivery forwarded without dedupe.
	NoDedupe []noDedupeFile `yaml:"no_dedupe"`
	// ChangedPayload: conflict, duplicate or new_event (row 7).
	ChangedPayload *string `yaml:"changed_payload"`
	policyFile     `yaml:",inline"`
	node           *yaml.Node // where it is in the file, for line numbers
}

type noDedupeFile struct {
	When         []conditionFile `yaml:"when"`
	IfKeyMissing bool            `yaml:"if_key_missing"`
	Reason       string          `yaml:"reason"`
}

type serializeFile struct {
	Key   []keyPartFile `yaml:"key"`
	Scope string        `yaml:"scope"`
	Wait  *Duration     `yaml:"wait"`
}

// scopeName is what a serialize scope may be called: it names a lock
// namespace in the store, shared by the senders that name it.
var scopeName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

type siteFile struct {
	Index      *[]string `yaml:"index"`
	Extensions []string  `yaml:"extensions"`
	MultiViews bool      `yaml:"multiviews"`
	Request    string    `yaml:"request"`
}

type file struct {
	Listen   string `yaml:"listen"`
	Upstream string `yaml:"upstream"`
	MaxBody  *Size  `yaml:"max_body"`
	// MaxInflight: requests on senders' paths handled at once.
	MaxInflight *int      `yaml:"max_inflight"`
	BodyTimeout *Duration `yaml:"body_timeout"`
	// TrustedProxies lists the addresses (IPs or CIDRs) of proxies in front
	// of hookonce, such as the site's nginx, whose X-Forwarded-* headers are
	// passed on to the site instead of being replaced.
	TrustedProxies []string `yaml:"trusted_proxies"`
	// Site: how the site maps URLs to scripts.
	Site     siteFile     `yaml:"site"`
	Defaults policyFile   `yaml:"defaults"`
	Senders  []senderFile `yaml:"senders"`
	// Paths holds per-path settings for paths that senders name.
	Paths map[string]pathFile `yaml:"paths"`
	// Notify: where the operator is told what to act on (notify.go).
	Notify *notifyFile `yaml:"notify"`
}
