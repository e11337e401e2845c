package proxy

import (
	"testing"
	"time"

	"github.com/hookonce/hookonce/contract"
)

// A claimed delivery's heartbeat as almost every delivery has it: started
// and stopped long before its first renewal is due.
func BenchmarkHeartbeatUnused(b *testing.B) {
	d := &delivery{s: &contract.Sender{Lease: contract.DefaultLease}, claimSent: time.Now()}
	b.ReportAllocs()
	for b.Loop() {
		d.heartbeat().stop()
	}
}
