package contract

import (
	"fmt"
	"strconv"
	"strings"
)

// retryable statuses are never final when they only fall in a class range
// ("4xx"): the sender must retry them and the claim must be freed.
var retryable = map[int]bool{408: true, 425: true, 429: true}

// StatusSet says which upstream statuses are final (stored and replayed).
type StatusSet struct {
	spec   string
	ranges [][2]int
	single map[int]bool
}

// ParseStatusSet parses "2xx,4xx", "200-299", "200,201,422".
func ParseStatusSet(spec string) (StatusSet, error) {
	set := StatusSet{spec: spec, single: map[int]bool{}}
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		switch {
		case part == "":
			continue
		case len(part) == 3 && strings.HasSuffix(part, "xx") && part[0] >= '1' && part[0] <= '5':
			lo := int(part[0]-'0') * 100
			set.ranges = append(set.ranges, [2]int{lo, lo + 99})
		case strings.Contains(part, "-"):
			a, b, _ := strings.Cut(part, "-")
			lo, err1 := strconv.Atoi(strings.TrimSpace(a))
			hi, err2 := strconv.Atoi(strings.TrimSpace(b))
			if err1 != nil || err2 != nil || lo < 100 || hi > 599 || lo > hi {
				return set, fmt.Errorf("invalid status range %q", part)
			}
			set.ranges = append(set.ranges, [2]int{lo, hi})
		default:
			n, err := strconv.Atoi(part)
			if err != nil || n < 100 || n > 599 {
				return set, fmt.Errorf("invalid status %q (want e.g. 2xx, 200-299, 422)", part)
			}
			set.single[n] = true
		}
	}
	if len(set.ranges) == 0 && len(set.single) == 0 {
		return set, fmt.Errorf("empty status list %q", spec)
	}
	return set, nil
}

// Final reports whether status is final. 5xx and the retryable 4xx (408,
// 425, 429) are final only when named one by one.
func (s StatusSet) Final(status int) bool {
	if s.single[status] {
		return true
	}
	if status >= 500 || retryable[status] {
		return false
	}
	for _, r := range s.ranges {
		if status >= r[0] && status <= r[1] {
			return true
		}
	}
	return false
}

func (s StatusSet) String() string { return s.spec }
