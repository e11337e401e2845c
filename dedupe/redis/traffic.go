package redis

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/hookonce/hookonce/dedupe"
)

// Traffic counters (dedupe.TrafficRecorder, dedupe.TrafficReader): one hash
// per UTC day, hookonce:traffic:{YYYY-MM-DD} (one key, so one slot in a
// Cluster), a field per counter named by a JSON array of its labels, added
// to by one script per day (lua/traffic.lua) and expiring
// dedupe.TrafficKeep after the day ends (EXPIREAT, by the server's clock).
// Reading walks the days of the window, at most that many keys: no SCAN.
// A day's hash holds at most dedupe.MaxTrafficShapes shapes per sender,
// path and outcome (the script keeps a count of each group's shapes in a
// "g" field and adds the rest to the group's dedupe.TrafficOtherDetail
// counter), so reading every day's hash reads a bounded number of fields.
// (A hash written before that bound starts its groups' counts at zero: it
// holds its old shapes and at most the bound more.)

var (
	//go:embed lua/traffic.lua
	trafficLua    string
	trafficScript = goredis.NewScript(trafficLua)
)

var (
	_ dedupe.TrafficRecorder = (*Store)(nil)
	_ dedupe.TrafficReader   = (*Store)(nil)
)

func trafficKey(day time.Time) string { return "hookonce:traffic:{" + day.Format("2006-01-02") + "}" }

// AddTraffic implements dedupe.TrafficRecorder: one script call per day
// in the batch, sent in one pipeline.
func (s *Store) AddTraffic(ctx context.Context, counts []dedupe.TrafficCount) error {
	cutoff := dedupe.TrafficDay(time.Now().Add(-dedupe.TrafficKeep))
	byDay := map[time.Time][]any{}
	var days []time.Time
	for _, c := range dedupe.MergeTraffic(counts) {
		if c.Day.Before(cutoff) {
			continue
		}
		field, err := json.Marshal([]any{c.Sender, c.Path, c.Outcome, c.Status, c.Detail})
		if err != nil {
			return err
		}
		other, err := json.Marshal([]any{c.Sender, c.Path, c.Outcome, c.Status, dedupe.TrafficOtherDetail})
		if err != nil {
			return err
		}
		group := ""
		if dedupe.TrafficCapped(c.Detail) {
			g, err := json.Marshal([]any{c.Sender, c.Path, c.Outcome})
			if err != nil {
				return err
			}
			group = string(g)
		}
		if _, ok := byDay[c.Day]; !ok {
			days = append(days, c.Day)
			byDay[c.Day] = []any{c.Day.Add(24*time.Hour + dedupe.TrafficKeep).Unix(), dedupe.MaxTrafficShapes}
		}
		byDay[c.Day] = append(byDay[c.Day], string(field), group, string(other), c.N, c.MaxMillis)
	}
	if len(days) == 0 {
		return nil
	}
	pipe := s.client.Pipeline()
	for _, d := range days {
		trafficScript.Run(ctx, pipe, []string{trafficKey(d)}, byDay[d]...)
	}
	cmds, err := pipe.Exec(ctx)
	if err != nil && isNoScript(err) {
		// The first call on a server: load the script, then again.
		for _, d := range days {
			if err := trafficScript.Run(ctx, s.client, []string{trafficKey(d)}, byDay[d]...).Err(); err != nil {
				return unavailable("add traffic", err)
			}
		}
		return nil
	}
	if err != nil {
		return unavailable("add traffic", err)
	}
	for _, c := range cmds {
		if err := c.Err(); err != nil {
			return unavailable("add traffic", err)
		}
	}
	return nil
}

func isNoScript(err error) bool {
	var re goredis.Error
	return errors.As(err, &re) && strings.HasPrefix(re.Error(), "NOSCRIPT")
}

// TrafficTotals implements dedupe.TrafficReader: the days' hashes (each
// bounded) summed here, Redis having no GROUP BY.
func (s *Store) TrafficTotals(ctx context.Context, since time.Time) ([]dedupe.TrafficTotal, error) {
	cs, err := s.Traffic(ctx, since)
	if err != nil {
		return nil, err
	}
	return dedupe.SumTraffic(cs), nil
}

// Traffic implements dedupe.TrafficReader.
func (s *Store) Traffic(ctx context.Context, since time.Time) ([]dedupe.TrafficCount, error) {
	now, err := s.serverNow(ctx)
	if err != nil {
		return nil, unavailable("traffic", err)
	}
	today := dedupe.TrafficDay(now)
	from := dedupe.TrafficDay(now.Add(-dedupe.TrafficKeep))
	if !since.IsZero() && dedupe.TrafficDay(since).After(from) {
		from = dedupe.TrafficDay(since)
	}
	pipe := s.client.Pipeline()
	var days []time.Time
	var cmds []*goredis.MapStringStringCmd
	for d := from; !d.After(today.AddDate(0, 0, 1)); d = d.AddDate(0, 0, 1) {
		days = append(days, d)
		cmds = append(cmds, pipe.HGetAll(ctx, trafficKey(d)))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, goredis.Nil) {
		return nil, unavailable("traffic", err)
	}
	var out []dedupe.TrafficCount
	for i, cmd := range cmds {
		h, err := cmd.Result()
		if err != nil {
			return nil, unavailable("traffic", err)
		}
		for f, v := range h {
			if !strings.HasPrefix(f, "n") {
				continue
			}
			var labels []any
			if err := json.Unmarshal([]byte(f[1:]), &labels); err != nil || len(labels) != 5 {
				continue // not a field this version wrote
			}
			c := dedupe.TrafficCount{Day: days[i]}
			c.Sender, _ = labels[0].(string)
			c.Path, _ = labels[1].(string)
			c.Outcome, _ = labels[2].(string)
			st, _ := labels[3].(float64)
			c.Status = int(st)
			c.Detail, _ = labels[4].(string)
			c.N, _ = strconv.ParseInt(v, 10, 64)
			c.MaxMillis, _ = strconv.ParseInt(h["m"+f[1:]], 10, 64)
			out = append(out, c)
		}
	}
	return dedupe.MergeTraffic(out), nil
}
