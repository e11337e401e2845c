package contract

import "testing"

// TestPHPDecimal2: PayKeeper's module signs the sum through PHP's
// number_format with two decimals, "." as the point and no thousands
// separator. The expected values were printed by PHP 8 for the same
// strings.
func TestPHPDecimal2(t *testing.T) {
	for in, want := range map[string]string{
		"100": "100.00", "100.00": "100.00", "100.5": "100.50", "1.005": "1.01", "0.285": "0.29",
		"99.995": "100.00", "-0.001": "0.00", "1e2": "100.00", "0": "0.00", "12345678.905": "12345678.91",
		" 7": "7.00", "-12.345": "-12.35", "0.1": "0.10", "9.999": "10.00",
	} {
		if got, ok := phpDecimal2(in); !ok || got != want {
			t.Errorf("%q: %q %v, want %q", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "abc", "1,5", "0x10", "NaN", "Inf", "1e999", "12abc"} {
		if got, ok := phpDecimal2(in); ok {
			t.Errorf("%q: %q, want refused", in, got)
		}
	}
}
