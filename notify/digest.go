package notify

import (
	"context"
	"os"
	"time"
)

// The gathering loop: events → at most one message per kind per
// Interval, a digest when several wait.

// maxListed bounds the events one message lists (and a group keeps); the
// rest are counted.
const maxListed = 10

// maxSeen bounds the events remembered as told (Unretried, Held, GivenUp: once
// per event); past it the oldest are forgotten.
const maxSeen = 50000

// entry is one line of a message: one event, or the refusals of one
// sender for one reason (count of them).
type entry struct {
	ev    Event
	count int
	first time.Time
	keys  []string // refusals: a few of the refused keys
}

// group is a kind's waiting entries.
type group struct {
	entries []*entry
	byID    map[string]*entry
	more    int       // entries past maxListed
	since   time.Time // when the first waiting entry came
	last    time.Time // when the kind's last message went
}

// refusalRun is one sender's refusals for one reason: the times of the
// latest RefusalCount, and whether they were told.
type refusalRun struct {
	times []time.Time
	told  bool
}

type gatherer struct {
	n        *Notifier
	groups   map[Kind]*group
	seen     map[string]bool
	seenFIFO []string
	refusals map[string]*refusalRun
	dropped  int // incoming events dropped, not yet said
}

func (n *Notifier) gather(ctx context.Context) {
	g := &gatherer{n: n, groups: map[Kind]*group{}, seen: map[string]bool{}, refusals: map[string]*refusalRun{}}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		n.mu.Lock()
		evs, dropped := n.in, n.inDropped
		n.in, n.inDropped = nil, 0
		n.mu.Unlock()
		now := time.Now()
		g.dropped += dropped
		for _, e := range evs {
			g.take(e, now)
		}
		next := g.flush(now)
		timer.Reset(time.Until(next))
		select {
		case <-ctx.Done():
			return
		case <-n.wake:
		case <-timer.C:
		}
	}
}

func (g *gatherer) once(id string) bool {
	if g.seen[id] {
		return false
	}
	g.seen[id] = true
	g.seenFIFO = append(g.seenFIFO, id)
	if len(g.seenFIFO) > maxSeen {
		delete(g.seen, g.seenFIFO[0])
		g.seenFIFO = g.seenFIFO[1:]
	}
	return true
}

// take files one event under its kind, or drops it: an event already
// told, refusals under the threshold.
func (g *gatherer) take(e Event, now time.Time) {
	e.Sender, e.Key, e.Reason, e.Detail = clean(e.Sender, 200), clean(e.Key, 300), clean(e.Reason, 1500), clean(e.Detail, 300)
	id := e.Sender + "\x00" + e.Key
	switch e.Kind {
	case Unretried, Held, GivenUp:
		if !g.once(string(e.Kind) + "\x00" + id) {
			return
		}
	case Refused:
		id = e.Sender + "\x00" + e.Reason
		r := g.refusals[id]
		if r == nil {
			if len(g.refusals) >= maxSeen {
				g.refusals = map[string]*refusalRun{}
			}
			r = &refusalRun{}
			g.refusals[id] = r
		}
		o := g.n.o
		if len(r.times) > 0 && e.At.Sub(r.times[len(r.times)-1]) > o.RefusalWithin {
			r.times, r.told = nil, false // quiet for a whole window: a new run
		}
		r.times = append(r.times, e.At)
		if len(r.times) > o.RefusalCount {
			r.times = r.times[1:]
		}
		if !r.told {
			if len(r.times) < o.RefusalCount || e.At.Sub(r.times[0]) > o.RefusalWithin {
				return
			}
			r.told = true
			gr := g.group(e.Kind, now)
			en := &entry{ev: e, count: len(r.times), first: r.times[0]}
			if e.Key != "" {
				en.keys = []string{e.Key}
			}
			g.add(gr, id, en)
			return
		}
	case StoreFailing, NotReady, BacklogOld:
		id = e.Sender
	case ReloadFailed:
		id = ""
	}
	gr := g.group(e.Kind, now)
	if en := gr.byID[id]; en != nil {
		en.count++
		if e.Kind == ReloadFailed || e.Kind == NotReady || e.Kind == BacklogOld {
			en.ev = e // the latest problems
		}
		if len(en.keys) < 3 && e.Key != "" {
			en.keys = append(en.keys, e.Key)
		}
		return
	}
	en := &entry{ev: e, count: 1, first: e.At}
	if e.Key != "" {
		en.keys = []string{e.Key}
	}
	g.add(gr, id, en)
}

func (g *gatherer) group(k Kind, now time.Time) *group {
	gr := g.groups[k]
	if gr == nil {
		gr = &group{byID: map[string]*entry{}}
		g.groups[k] = gr
	}
	if len(gr.entries) == 0 && gr.more == 0 {
		gr.since = now
	}
	return gr
}

func (g *gatherer) add(gr *group, id string, en *entry) {
	if len(gr.entries) >= maxListed {
		gr.more++
		return
	}
	gr.entries = append(gr.entries, en)
	gr.byID[id] = en
}

// flush sends each kind's message that is due, and returns when the next
// one will be.
func (g *gatherer) flush(now time.Time) time.Time {
	o := g.n.o
	next := now.Add(time.Hour)
	for k, gr := range g.groups {
		if len(gr.entries) == 0 && gr.more == 0 {
			continue
		}
		due := gr.since.Add(o.DigestWait)
		if !gr.last.IsZero() && gr.last.Add(o.Interval).After(due) {
			due = gr.last.Add(o.Interval)
		}
		if due.After(now) {
			if due.Before(next) {
				next = due
			}
			continue
		}
		m := compose(k, o.Host, gr.entries, gr.more, now)
		if g.dropped > 0 {
			m.Text += "\n\n(" + itoa(g.dropped) + " earlier events were not looked at: too many came at once.)"
			g.dropped = 0
		}
		g.n.enqueue(m)
		gr.entries, gr.more, gr.last = nil, 0, now
		gr.byID = map[string]*entry{}
	}
	return next
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "hookonce"
	}
	return h
}
