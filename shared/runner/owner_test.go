package runner

import (
	"net/http/httptest"
	"testing"
)

func TestLoopbackOwner(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, remote, host, owner string
		want                      bool
	}{
		{"loopback peer and host", "127.0.0.1:5000", "127.0.0.1:8080", "alice", true},
		{"localhost", "127.0.0.1:5000", "localhost:8080", "alice", true},
		{"ipv6", "[::1]:5000", "[::1]:8080", "alice", true},
		{"no owner", "127.0.0.1:5000", "127.0.0.1:8080", "", false},
		{"network peer", "192.0.2.7:5000", "127.0.0.1:8080", "alice", false},
		{"dns rebinding", "127.0.0.1:5000", "evil.example.com:8080", "alice", false},
		{"rebinding without port", "127.0.0.1:5000", "evil.example.com", "alice", false},
		{"lookalike", "127.0.0.1:5000", "localhost.evil.example.com:8080", "alice", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req := httptest.NewRequest("GET", "/jobs", nil)
			req.RemoteAddr, req.Host = tc.remote, tc.host
			if tc.owner != "" {
				req.Header.Set(OwnerHeader, tc.owner)
			}
			if got, ok := LoopbackOwner(req); ok != tc.want || (ok && got != tc.owner) {
				t.Errorf("LoopbackOwner = %q, %v; want %v", got, ok, tc.want)
			}
		})
	}
}
