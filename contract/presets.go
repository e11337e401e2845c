package contract

import "time"

// preset is what naming a well-known sender fills in.
type preset struct {
	Keys        []KeyPart
	Signature   SignatureConfig
	RetryWindow time.Duration
}

// presets by name. Empty until the signature schemes land: a preset without
// its signature check would let forged deliveries occupy event ids.
var presets = map[string]preset{}
