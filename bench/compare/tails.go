//go:build benchcompare

package main

import (
	"math"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
	"time"
)

// tails is what can make an open-loop request slow besides the path
// itself, read over one run: this process's longest GC pause and
// longest wait of a runnable goroutine for a thread (the Go runtime's
// own histograms; the largest bucket that gained a count, so an upper
// bound), and the time the hypervisor gave this VM's CPUs to others
// (steal, /proc/stat).
type tails struct {
	gcPause, schedWait time.Duration
	gcs                int64
	steal              time.Duration
}

// tailMeter holds the counters read at a run's start; stop reads the
// change since.
type tailMeter struct {
	samples []metrics.Sample
	steal   time.Duration
}

var tailMetrics = []string{"/gc/pauses:seconds", "/sched/latencies:seconds", "/gc/cycles/total:gc-cycles"}

func startTails() *tailMeter {
	return &tailMeter{samples: readSamples(), steal: steal()}
}

// readSamples reads tailMetrics into fresh samples.
func readSamples() []metrics.Sample {
	s := make([]metrics.Sample, len(tailMetrics))
	for i, n := range tailMetrics {
		s[i].Name = n
	}
	metrics.Read(s)
	return s
}

func (m *tailMeter) stop() tails {
	now := readSamples()
	return tails{
		gcPause:   maxGained(m.samples[0].Value.Float64Histogram(), now[0].Value.Float64Histogram()),
		schedWait: maxGained(m.samples[1].Value.Float64Histogram(), now[1].Value.Float64Histogram()),
		gcs:       int64(now[2].Value.Uint64() - m.samples[2].Value.Uint64()),
		steal:     steal() - m.steal,
	}
}

// maxGained is the upper bound of the highest bucket of after that holds
// more counts than in before: the longest event between the two reads.
func maxGained(before, after *metrics.Float64Histogram) time.Duration {
	for i := len(after.Counts) - 1; i >= 0; i-- {
		if after.Counts[i] > before.Counts[i] {
			hi := after.Buckets[i+1]
			if math.IsInf(hi, 1) { // the last bucket: its lower bound
				hi = after.Buckets[i]
			}
			return time.Duration(hi * float64(time.Second))
		}
	}
	return 0
}

// steal is the CPU time the hypervisor gave to others, all CPUs, from
// /proc/stat (0 where it is not reported).
func steal() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	if len(f) < 9 || f[0] != "cpu" {
		return 0
	}
	ticks, err := strconv.ParseInt(f[8], 10, 64)
	if err != nil {
		return 0
	}
	return time.Duration(ticks) * (time.Second / 100) // USER_HZ
}
