package schedules

import "testing"

func TestParseShardMsg(t *testing.T) {
	cases := []struct {
		body  string
		shard int
		ok    bool
	}{
		{`{"fireShard":0}`, 0, true},
		{`{"fireShard":15}`, 15, true},
		{`{"fireShard":16}`, 0, false},
		{`{"fireShard":-1}`, 0, false},
		{`{"firing":"s1@2026-01-01T00:00:00Z","owner":"o","bucket":"2026-01-01T00:00Z#01"}`, 0, false},
		{`{}`, 0, false},
		{`not json`, 0, false},
	}
	for _, c := range cases {
		sh, ok := parseShardMsg(c.body)
		if ok != c.ok || sh != c.shard {
			t.Errorf("parseShardMsg(%s) = %d, %v; want %d, %v", c.body, sh, ok, c.shard, c.ok)
		}
		if c.ok && !IsTimerMessage(c.body) {
			t.Errorf("IsTimerMessage(%s) = false: a relayed shard would not be recognised on the timer queue", c.body)
		}
	}
}
