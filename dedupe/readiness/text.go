package readiness

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// WriteText prints the report for a terminal: per sender its verdict, the
// reason, the problems with their fixes, the evidence and the notes; then
// the paths with deliveries no sender took.
func WriteText(w io.Writer, r Report) {
	since := "nothing counted yet"
	if !r.Since.IsZero() {
		since = "since " + r.Since.Format("2006-01-02")
	}
	fmt.Fprintf(w, "readiness %s (generated %s)\n", since, r.Generated.Format("2006-01-02 15:04Z"))
	if len(r.Senders) == 0 {
		fmt.Fprintln(w, "\nno senders")
	}
	for _, s := range r.Senders {
		mode := ""
		if s.Mode != "" {
			mode = ", mode " + s.Mode
		}
		fmt.Fprintf(w, "\n%s: %s%s\n  %s\n", s.Sender, strings.ToUpper(s.Verdict), mode, s.Reason)
		for _, f := range s.Problems {
			writeFinding(w, "✗", f)
		}
		keys := fmt.Sprintf("%d", s.DistinctKeys)
		if !s.DistinctKeysExact {
			keys = "~" + keys
		}
		fmt.Fprintf(w, "  deliveries %d (keyed %d, distinct keys %s), exact repeats %d (replayed %d), changed payloads %d, missing key %d, bad signature %d, unsigned %d\n",
			s.Deliveries, s.Keyed, keys, s.ExactRepeats, s.Replayed, s.Changed, s.MissingKey, s.SignatureFailures, s.Unsigned)
		if len(s.Answers) > 0 {
			var as []string
			for _, st := range slices.Sorted(maps.Keys(s.Answers)) {
				as = append(as, fmt.Sprintf("%s×%d", st, s.Answers[st]))
			}
			fmt.Fprintf(w, "  site answers %s, failed the success rule %d, slowest %s", strings.Join(as, " "), s.NotSuccess, ms(s.SlowestMillis))
			if s.TimeoutMillis > 0 {
				fmt.Fprintf(w, " of %s (%s)", ms(s.TimeoutMillis), s.TimeoutFrom)
			}
			fmt.Fprintln(w)
		}
		for _, fc := range s.ChangedFields {
			fmt.Fprintf(w, "  changed field %s: %d times, %d keys → %s\n", fc.Field, fc.Times, fc.Keys, fc.Suggest)
		}
		for _, f := range s.Notes {
			writeFinding(w, "·", f)
		}
	}
	for _, p := range r.Paths {
		fmt.Fprintf(w, "\npath %s: %d deliveries matched no sender\n", p.Path, p.Deliveries)
		writeFinding(w, "✗", p.Finding)
		for _, sh := range p.Shapes {
			fmt.Fprintf(w, "  %d× %s\n", sh.N, sh.Shape)
		}
	}
}

func writeFinding(w io.Writer, mark string, f Finding) {
	fmt.Fprintf(w, "  %s %s", mark, f.What)
	if f.Fix != "" {
		fmt.Fprintf(w, " → %s", f.Fix)
	}
	fmt.Fprintln(w)
}
