package runner

import (
	"net"
	"net/http"
)

// LoopbackOwner takes the caller's identity from OwnerHeader, and only
// from a loopback peer: the local runner has no authentication, so a
// header from the network would let anyone claim to be anyone.
func LoopbackOwner(req *http.Request) (string, bool) {
	host, _, err := net.SplitHostPort(req.RemoteAddr)
	if err != nil {
		return "", false
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return "", false
	}
	v := req.Header.Get(OwnerHeader)
	return v, v != ""
}
