package contract

import (
	"fmt"
	"net/netip"
	"time"
)

// addrVerifier accepts deliveries from listed addresses only, for senders
// that sign nothing and publish the networks they send from (YooKassa).
// It judges Request.Client: the peer, or, behind a proxy listed in
// trusted_proxies, the address that proxy forwarded. Behind a proxy that
// is not listed every delivery comes from the proxy, so the check fails
// closed.
type addrVerifier struct {
	allow []netip.Prefix
}

func buildSourceAddress(c *sigCompiler) Verifier {
	v := &addrVerifier{}
	if len(c.cfg.Allow) == 0 {
		c.bad("allow", "required for scheme source-address: the sender's addresses (IPs or CIDRs)")
	}
	for i, a := range c.cfg.Allow {
		p, err := parsePrefix(a)
		if err != nil {
			c.bad(fmt.Sprintf("allow[%d]", i), "%q: want an IP address or a CIDR such as 185.71.76.0/27", a)
			continue
		}
		v.allow = append(v.allow, p)
	}
	return v
}

// parsePrefix reads a CIDR, or a single address as its own /32 or /128.
func parsePrefix(s string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

func (v *addrVerifier) Verify(req *Request, _ time.Time) error {
	if !req.Client.IsValid() {
		return sigErr("sender address unknown")
	}
	a := req.Client.Unmap()
	for _, p := range v.allow {
		if p.Contains(a) {
			return nil
		}
	}
	return sigErr("sender address %s is not in the allowlist", a)
}

var _ Verifier = (*addrVerifier)(nil)
