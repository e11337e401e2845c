// What the record commands (lookup, list, conflicts) share: --json, --key
// and the JSON printer.

package cli

import (
	"encoding/json"
	"io"

	"github.com/urfave/cli/v2"
)

func jsonFlag() *cli.BoolFlag {
	return &cli.BoolFlag{Name: "json", EnvVars: []string{"HOOKONCE_JSON"}, Usage: "print JSON for scripts"}
}

// keyPartFlag is list's and conflicts' --key: the whole key, or one whole
// part of it (dedupe.KeyHasPart), so support can ask for a payment id
// without the status the key also holds.
func keyPartFlag() *cli.StringFlag {
	return &cli.StringFlag{Name: "key", EnvVars: []string{"HOOKONCE_KEY"},
		Usage: "only keys that are this, or hold it as one whole part (8742591 finds 8742591:CONFIRMED; scans the sender's records)"}
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
