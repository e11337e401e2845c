package notify_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every Notifier's loops and every channel's sender stop with Run's
// context: nothing is left running after the tests.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"), goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"))
}
