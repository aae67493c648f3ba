package service

import (
	"context"
	"net"

	"github.com/vkcounter/vkcounter/internal/config"
)

// warnRisky logs a warning for every setting that exposes or risks
// something, once everything listens (so the actual addresses are known).
func (m *Main) warnRisky(ctx context.Context, communities []config.Community) {
	for _, c := range communities {
		if m.cfg.VKMode == config.ModeCallback && len(c.Tokens()) > 0 && c.Secret == "" {
			m.log.Warn().Int("group_id", c.GroupID).Msg("replies are sent but the community has no Callback API secret: anyone who reaches the webhook can post events the bot answers; set VK_SECRET (or secret in VK_GROUPS) to the community's secret key")
		}
	}
	if m.cfg.CountersHTTPToken == "" && !isLoopback(m.http.httpLn.Addr()) {
		// Safe as it is (nothing is exposed), so not a warning: it tells
		// why a remote client gets 401.
		m.log.Info().Str("http", m.HTTPAddr()).Msg("COUNTERS_HTTP_TOKEN is empty and HTTP_ADDR is not loopback: /counters/ refuses every client but loopback ones (401); set COUNTERS_HTTP_TOKEN to use it from elsewhere")
	}
	if ip := publicAddr(m.http.adminLn.Addr(), net.InterfaceAddrs); ip != "" {
		m.log.Warn().Str("admin", m.AdminAddr()).Str("public_address", ip).Msg("ADMIN_ADDR accepts connections on a public address: /metrics, /stats and /readyz answer whoever reaches it; listen on loopback or a private network only")
	}
	if m.port.counterLn != nil {
		if ip := publicAddr(m.port.counterLn.Addr(), net.InterfaceAddrs); ip != "" {
			m.log.Warn().Str("counters", m.CounterAddr()).Str("public_address", ip).Msg("COUNTER_ADDR accepts connections on a public address: the counter protocol has no authentication; listen on loopback or a private network only")
		}
	}
	m.warnEviction(ctx)
}

// publicAddr returns a public address (neither loopback, link-local nor
// private, such as 10.0.0.0/8 or fd00::/8) a listener accepts connections
// on, or "" when it has none. A listener on all addresses (":9090",
// "[::]:9090") has those of the machine's interfaces (ifaceAddrs); should
// they be unknown, it counts as public. A container or a Fly.io machine
// has private addresses only, so listening on all of them exposes nothing.
func publicAddr(a net.Addr, ifaceAddrs func() ([]net.Addr, error)) string {
	tcp, ok := a.(*net.TCPAddr)
	if !ok {
		return ""
	}
	public := func(ip net.IP) bool { return ip.IsGlobalUnicast() && !ip.IsPrivate() }
	if !tcp.IP.IsUnspecified() {
		if public(tcp.IP) {
			return tcp.IP.String()
		}
		return ""
	}
	addrs, err := ifaceAddrs()
	if err != nil {
		return tcp.IP.String()
	}
	for _, ia := range addrs {
		if n, ok := ia.(*net.IPNet); ok && public(n.IP) {
			return n.IP.String()
		}
	}
	return ""
}

// isLoopback reports whether a listener's address accepts loopback
// connections only.
func isLoopback(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}
