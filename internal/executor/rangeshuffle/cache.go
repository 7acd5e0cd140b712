package rangeshuffle

import (
	"cmp"
	"sync"
)

// DefaultHeaderCacheBytes bounds a HeaderCache: 8 MiB, the headers of
// about 300 runs of 1,024 samples of 10-byte keys.
const DefaultHeaderCacheBytes = 8 << 20

// HeaderCache keeps the runs' headers a host's reducers have read, so the
// next reducer of the same stage on this host skips the header GETs (each
// reducer needs every run's header to draw the boundaries). A run's key
// names its attempt and the run is written once, so an entry never goes
// stale. When the bound is reached the cache starts over (a job's
// reducers read one stage's runs; older entries are most likely a
// finished job's). The zero value is ready; a nil one keeps nothing.
type HeaderCache struct {
	mu    sync.Mutex
	m     map[string][]byte
	bytes int64
	Limit int64 // 0: DefaultHeaderCacheBytes
}

func (c *HeaderCache) get(key string) ([]byte, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.m[key]
	return h, ok
}

func (c *HeaderCache) put(key string, head []byte) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	size := int64(len(head) + len(key))
	limit := cmp.Or(c.Limit, DefaultHeaderCacheBytes)
	if size > limit {
		return
	}
	if _, ok := c.m[key]; ok {
		return
	}
	if c.m == nil || c.bytes+size > limit {
		c.m, c.bytes = map[string][]byte{}, 0
	}
	c.m[key] = head
	c.bytes += size
}
