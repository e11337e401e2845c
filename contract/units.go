package contract

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Size is a byte count written as 1048576, 64KiB, 1MiB or 1MB.
type Size int64

var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
	{"KB", 1000}, {"MB", 1000 * 1000}, {"GB", 1000 * 1000 * 1000},
	{"B", 1},
}

// ParseSize parses a size as the config file and flags write it.
func ParseSize(s string) (Size, error) {
	s = strings.TrimSpace(s)
	mult := int64(1)
	num := s
	for _, u := range sizeUnits {
		if strings.HasSuffix(s, u.suffix) {
			mult, num = u.mult, strings.TrimSpace(strings.TrimSuffix(s, u.suffix))
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > (1<<50)/mult {
		return 0, fmt.Errorf("invalid size %q (want e.g. 1048576, 64KiB, 1MiB, 1MB)", s)
	}
	return Size(n * mult), nil
}

// UnmarshalYAML accepts a plain integer or a string with a unit.
func (s *Size) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseSize(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*s = v
	return nil
}

// Duration is a Go duration (90s, 72h) in YAML.
type Duration time.Duration

// UnmarshalYAML parses a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: invalid duration %q (want e.g. 90s, 72h)", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}
