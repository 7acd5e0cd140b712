package runner

import (
	"net"
	"net/http"
	"strings"
)

// LoopbackOwner takes the caller's identity from OwnerHeader, and only
// from a loopback peer that addressed the runner by a loopback name: the
// header itself proves nothing (the run's token, checked before this by
// localauth.Require, proves the caller is the runner's user), so a header
// from the network would let anyone claim to be anyone, and a web page
// whose host name an attacker re-points at 127.0.0.1 (DNS rebinding)
// reaches the runner from the browser on this machine, but with its own
// name in Host.
func LoopbackOwner(req *http.Request) (string, bool) {
	host, _, err := net.SplitHostPort(req.RemoteAddr)
	if err != nil {
		return "", false
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() || !loopbackHost(req.Host) {
		return "", false
	}
	v := req.Header.Get(OwnerHeader)
	return v, v != ""
}

// loopbackHost reports whether a Host header names this machine.
func loopbackHost(hostport string) bool {
	h := hostport
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		h = host
	}
	h = strings.TrimSuffix(strings.Trim(h, "[]"), ".")
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}
