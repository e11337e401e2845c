package notify

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// What each message says: what happened in the operator's words, the
// sender, the key, and the commands to look at it or act (the names and
// arguments of hookonce's command line).

// compose writes the message of a kind's entries (more: entries past
// the listed ones).
func compose(k Kind, host string, es []*entry, more int, now time.Time) Message {
	m := Message{ID: newID(), Kind: k, Host: host, At: now}
	total := more
	for _, e := range es {
		m.Events = append(m.Events, e.ev)
		if k == Refused || k == StoreFailing {
			total += e.count
		} else {
			total++
		}
	}
	m.Count = total
	var b strings.Builder
	line := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	cmd := func(what, c string) {
		line("%s: %s", what, c)
		m.Commands = append(m.Commands, c)
	}
	single := len(es) == 1 && more == 0
	first := Event{}
	if len(es) > 0 {
		first = es[0].ev
	}
	// event names the one event of a message: sender, key, what is known.
	event := func() {
		line("Sender: %s", first.Sender)
		line("Key: %s", first.Key)
		if first.Detail != "" {
			line("%s", first.Detail)
		}
	}
	list := func(f func(e *entry) string) {
		for _, e := range es {
			line("- %s", f(e))
		}
		if more > 0 {
			line("- and %d more", more)
		}
	}
	switch k {
	case Unretried:
		if single {
			m.Subject = fmt.Sprintf("%s stopped retrying %s", first.Sender, first.Key)
			line("hookonce on %s: an event never completed, and its sender stopped retrying it.", host)
			event()
			line("The shop never finished it, and the provider will not send it again by itself.")
			cmd("Look at it", "hookonce lookup "+arg(first.Sender)+" "+arg(first.Key))
			cmd("Send it to the shop again", "hookonce redeliver "+arg(first.Sender)+" "+arg(first.Key))
			line("(redeliver needs store_request_body; without it, resend it from the provider's dashboard.)")
			break
		}
		m.Subject = fmt.Sprintf("%d events never completed", total)
		line("hookonce on %s: %d events never completed, and their senders stopped retrying them:", host, total)
		list(eventLine)
		cmd("List them", "hookonce list --status unretried")
		cmd("Look at one", "hookonce lookup "+arg(first.Sender)+" "+arg(first.Key))
		cmd("Send them all to the shop again", "hookonce redeliver --status unretried")
	case Held:
		if single {
			m.Subject = fmt.Sprintf("%s %s held: did the shop run it?", first.Sender, first.Key)
			line("hookonce on %s: a delivery was cut off at the shop and is held: the shop may or may not have run it.", host)
			event()
		} else {
			m.Subject = fmt.Sprintf("%d deliveries held: did the shop run them?", total)
			line("hookonce on %s: %d deliveries were cut off at the shop and are held: the shop may or may not have run them:", host, total)
			list(eventLine)
			cmd("List them", "hookonce list --status unknown")
		}
		line("Until you decide, the provider's retries are answered 409. Check in the shop whether it was applied (the order, the payment).")
		cmd("Look at it", "hookonce lookup "+arg(first.Sender)+" "+arg(first.Key))
		cmd("Not applied: run it now", "hookonce redeliver "+arg(first.Sender)+" "+arg(first.Key))
		cmd("Not applied: let the provider's next retry run it", "hookonce release "+arg(first.Sender)+" "+arg(first.Key))
		line("Applied: nothing to run; the retries keep getting 409 until the provider gives up.")
	case Refused:
		m.Subject = refusedSubject(es, total)
		line("hookonce on %s: deliveries were refused and never reached the shop:", host)
		for _, e := range es {
			line("- %s: %d refused in %s: %s", e.ev.Sender, e.count, since(e.first, now), refusedWhat(e.ev.Reason))
			if len(e.keys) > 0 {
				line("  keys: %s", strings.Join(e.keys, ", "))
			}
		}
		if more > 0 {
			line("- and %d more", more)
		}
		seen := map[string]bool{}
		for _, e := range es {
			if seen[e.ev.Reason] {
				continue
			}
			seen[e.ev.Reason] = true
			s := arg(e.ev.Sender)
			switch e.ev.Reason {
			case ReasonSignature:
				line("A signature that does not verify: most often the secret was changed in the provider's dashboard and not in hookonce's config (or the other way round); the provider retries, then gives up.")
				cmd("Check a saved request", "hookonce check --request FILE")
				cmd("In the log", "journalctl -u hookonce --since -1h | grep rejected_signature")
			case ReasonConflict:
				line("A known event id with another payload: the first payload stays, the changed one was answered 422.")
				cmd("See them", "hookonce conflicts --sender "+s)
				if len(e.keys) > 0 {
					cmd("Let a changed payload through as its own event", "hookonce accept "+s+" "+arg(e.keys[0]))
				}
			case ReasonMissingKey:
				line("No event id where the config says it is (answered 400): the provider changed its notification, or the key names the wrong field.")
				cmd("Save one request to a file and see what hookonce reads", "hookonce check --request FILE")
			}
		}
	case StoreFailing:
		m.Subject = "the store is failing"
		line("hookonce on %s: the store failed; %d deliveries could not be claimed and were answered 503 (the providers retry later; nothing reached the shop meanwhile):", host, total)
		for _, e := range es {
			line("- %s: %d", e.ev.Sender, e.count)
		}
		if more > 0 {
			line("- and %d more senders", more)
		}
		cmd("What the store says", "hookonce health --ready")
		cmd("In the log", `journalctl -u hookonce --since -1h | grep store_error`)
	case NotReady:
		if single {
			m.Subject = first.Sender + " is no longer ready"
		} else {
			m.Subject = fmt.Sprintf("%d senders are no longer ready", total)
		}
		line("hookonce on %s: a sender that was ready to go live no longer is:", host)
		for _, e := range es {
			line("- %s: %s", e.ev.Sender, e.ev.Reason)
		}
		if more > 0 {
			line("- and %d more", more)
		}
		cmd("Why", "hookonce readiness --sender "+arg(first.Sender))
	case ReloadFailed:
		m.Subject = "config reload refused"
		line("hookonce on %s: the config reload was refused; the previous rules stay in force (a new secret or sender is not).", host)
		if first.Detail != "" {
			line("File: %s", first.Detail)
		}
		if first.Reason != "" {
			line("Problems: %s", first.Reason)
		}
		c := "hookonce check"
		if first.Detail != "" {
			c += " --config " + arg(first.Detail)
		}
		cmd("Check it", c)
		cmd("Then, once fixed", "systemctl reload hookonce")
	case GivenUp:
		if single {
			m.Subject = fmt.Sprintf("%s %s given up: the shop never took it", first.Sender, first.Key)
			line("hookonce on %s: hookonce answered this delivery for the shop (ack: durable) and has stopped trying to deliver it: the shop never took it.", host)
			event()
			line("The provider was told it was received and will not send it again: unless you send it, the shop never gets it.")
		} else {
			m.Subject = fmt.Sprintf("%d deliveries given up: the shop never took them", total)
			line("hookonce on %s: hookonce answered these deliveries for the shop (ack: durable) and has stopped trying to deliver them: the shop never took them:", host)
			list(eventLine)
			line("The providers were told they were received and will not send them again: unless you send them, the shop never gets them.")
		}
		cmd("Look at it (the shop's answers)", "hookonce lookup "+arg(first.Sender)+" "+arg(first.Key))
		cmd("Once the shop works, send it", "hookonce redeliver "+arg(first.Sender)+" "+arg(first.Key))
		if !single {
			line("(The same for each one listed.)")
		}
	case BacklogOld:
		if single {
			m.Subject = first.Sender + ": deliveries waiting over an hour for the shop"
		} else {
			m.Subject = fmt.Sprintf("%d senders: deliveries waiting over an hour for the shop", total)
		}
		line("hookonce on %s: hookonce answered these deliveries for the shop (ack: durable), and the shop has not taken them for over an hour:", host)
		for _, e := range es {
			if e.ev.Detail != "" {
				line("- %s: %s", e.ev.Sender, e.ev.Detail)
			} else {
				line("- %s", e.ev.Sender)
			}
		}
		if more > 0 {
			line("- and %d more senders", more)
		}
		line("hookonce keeps trying; the providers will not send them again. Fix what the shop answers (the tries show its status), and the next try delivers them.")
		for _, e := range es {
			cmd("List "+e.ev.Sender+"'s", "hookonce list --sender "+arg(e.ev.Sender)+" --status pending")
		}
	case Test:
		m.Subject = "test message"
		line("hookonce on %s: a test message (hookonce notify test). If you read this, the channel works.", host)
	}
	m.Subject = "hookonce " + host + ": " + m.Subject
	m.Text = strings.TrimRight(b.String(), "\n")
	return m
}

// eventLine is one event of a digest: sender, key and what is known.
func eventLine(e *entry) string {
	s := e.ev.Sender + " " + e.ev.Key
	if e.ev.Detail != "" {
		s += ": " + e.ev.Detail
	}
	return s
}

func refusedSubject(es []*entry, total int) string {
	if len(es) == 1 {
		return fmt.Sprintf("%d deliveries of %s refused (%s)", es[0].count, es[0].ev.Sender, es[0].ev.Reason)
	}
	return fmt.Sprintf("%d deliveries refused", total)
}

func refusedWhat(reason string) string {
	switch reason {
	case ReasonSignature:
		return "the signature did not verify (401)"
	case ReasonConflict:
		return "a known event id with another payload (422)"
	case ReasonMissingKey:
		return "no event id where the config says (400)"
	}
	return reason
}

// since says how long ago t was, in whole seconds or minutes.
func since(t, now time.Time) string {
	d := now.Sub(t)
	if d < time.Minute {
		return strconv.Itoa(int(d.Seconds())+1) + "s"
	}
	return strconv.Itoa(int(d.Minutes()+0.5)) + "m"
}

// arg quotes a command argument for a POSIX shell when it needs it.
func arg(s string) string {
	if s == "" {
		return "''"
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.:/@%+=,", r)) {
			return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
		}
	}
	return s
}

func itoa(n int) string { return strconv.Itoa(n) }
