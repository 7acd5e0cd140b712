//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package synchttp

import "syscall"

// peekAlive cannot peek here: an idle connection the server closed shows
// as a failed request, which the SDK's retryer retries.
func peekAlive(syscall.RawConn) bool { return true }
