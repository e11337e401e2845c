//go:build !benchcompare

package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
)

// Without the benchcompare tag the command checks its flags and says how
// to build it for real.
func main() {
	if _, err := parseFlags(os.Args[1:], os.Stderr); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(2)
	}
	fmt.Fprintln(os.Stderr, "compare: built without the benchcompare tag; run: go run -tags benchcompare ./bench/compare [flags]")
	os.Exit(2)
}
