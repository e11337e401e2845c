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
		if line := RulesLine(s); line != "" {
			fmt.Fprintf(w, "  %s\n", line)
		}
		for _, f := range s.Problems {
			writeFinding(w, "✗", f)
		}
		keys := fmt.Sprintf("%d", s.DistinctKeys)
		if !s.DistinctKeysExact {
			keys = "~" + keys
		}
		fmt.Fprintf(w, "  deliveries %d (keyed %d, distinct keys %s), exact repeats %d (replayed %d), changed payloads %d, missing key %d, bad signature %d (refused strangers %d), unsigned %d\n",
			s.Deliveries, s.Keyed, keys, s.ExactRepeats, s.Replayed, s.Changed, s.MissingKey, s.SignatureFailures, s.RefusedStrangers, s.Unsigned)
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

// RulesLine says since when the sender's rules in force have been counted
// ("" when the report counts from --since or the sender has no tag).
func RulesLine(s SenderReport) string {
	switch {
	case s.Rules == "":
		return ""
	case s.RulesSince.IsZero() && s.EarlierRules > 0:
		return fmt.Sprintf("rules %s: no delivery since they last changed; %d under earlier rules not counted", s.Rules, s.EarlierRules)
	case s.RulesSince.IsZero():
		return ""
	case s.EarlierRules > 0:
		return fmt.Sprintf("rules %s: counted since they last changed, %s (%d deliveries under earlier rules not counted; --since to count them)", s.Rules, s.RulesSince.Format("2006-01-02"), s.EarlierRules)
	}
	return fmt.Sprintf("rules %s: counted since %s", s.Rules, s.RulesSince.Format("2006-01-02"))
}
