//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package synchttp

import "syscall"

// peekAlive peeks at the socket without blocking or consuming: EAGAIN
// (nothing to read) is an idle connection the server still holds open;
// end of stream, bytes or an error (a reset) are one it closed or broke.
func peekAlive(rc syscall.RawConn) bool {
	alive := false
	var buf [1]byte
	err := rc.Read(func(fd uintptr) bool {
		for {
			_, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			if err == syscall.EINTR {
				continue
			}
			alive = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK
			return true
		}
	})
	return err == nil && alive
}
