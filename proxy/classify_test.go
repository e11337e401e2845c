package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/hookonce/hookonce/proxy/internal/oneshot"
)

// How a forward ended, as classify reads it: a request of which any byte
// left is never unreachable (rows 10 and 10a).
func TestClassify(t *testing.T) {
	live := context.Background()
	expired, cancel := context.WithDeadline(context.Background(), time.Unix(1, 0))
	defer cancel()
	shutdown, stop := context.WithCancel(context.Background())
	stop()
	reset := &net.OpError{Op: "write", Net: "tcp", Err: syscall.ECONNRESET}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	deadline := fmt.Errorf("%w (%w)", context.DeadlineExceeded, reset)
	for _, tt := range []struct {
		name         string
		ctx, abort   context.Context
		err          error
		wroteHeaders bool // http.Transport's WroteHeaders
		want         ending
	}{
		{"answer", live, live, nil, false, answered},
		{"oneShot: dial refused", live, live, refused, false, unreachable},
		{"oneShot: dial timeout", expired, live, fmt.Errorf("%w (%w)", context.DeadlineExceeded, &net.OpError{Op: "dial", Err: errors.New("i/o timeout")}), false, unreachable},
		{"oneShot: reset before the first byte", live, live, &oneshot.SendError{Written: 0, Err: reset}, false, unreachable},
		{"oneShot: nothing written, whatever the trace said", live, live, &oneshot.SendError{Written: 0, Err: reset}, true, unreachable},
		{"oneShot: reset after the headers, no answer", live, live, &oneshot.SendError{Written: 300, Err: reset}, false, broken},
		{"oneShot: reset after the whole request", live, live, &oneshot.SendError{Written: 1 << 20, Err: reset}, false, broken},
		{"oneShot: deadline before the first byte", expired, live, &oneshot.SendError{Written: 0, Err: deadline}, false, unreachable},
		{"oneShot: deadline after the headers", expired, live, &oneshot.SendError{Written: 300, Err: deadline}, false, timedOut},
		{"oneShot: shutdown before the first byte", live, shutdown, &oneshot.SendError{Written: 0, Err: context.Canceled}, false, aborted},
		{"oneShot: shutdown after the headers", live, shutdown, &oneshot.SendError{Written: 300, Err: context.Canceled}, false, abortedAtSite},
		{"transport: dial refused", live, live, refused, false, unreachable},
		{"transport: TLS handshake failed", live, live, errors.New("remote error: tls: handshake failure"), false, unreachable},
		{"transport: write reset after the headers", live, live, reset, true, broken},
		{"transport: deadline after the headers", expired, live, context.DeadlineExceeded, true, timedOut},
		{"transport: deadline before the headers", expired, live, context.DeadlineExceeded, false, unreachable},
		{"transport: shutdown after the headers", live, shutdown, context.Canceled, true, abortedAtSite},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := classify(tt.ctx, tt.abort, tt.err, requestStarted(tt.err, tt.wroteHeaders)); got != tt.want {
				t.Fatalf("classify = %d, want %d", got, tt.want)
			}
		})
	}
}
