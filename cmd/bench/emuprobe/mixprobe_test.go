package emuprobe

import (
	"testing"
	"time"
)

func TestMixPrices(t *testing.T) {
	ms := time.Millisecond
	// 100 tasks a second of 2 DynamoDB requests, 4 ms of DynamoDB Local a
	// task: 2 ms a request, 0.4 cores.
	lvl := MixLevel{Rate: 100, Dynamo: 2, SQS: 0.5, JavaCPU: 4 * ms, MotoCPU: 2 * ms}
	for _, c := range []struct {
		name          string
		p             Emulator
		writes, reads float64
		wantCPU       time.Duration
	}{
		{"no mix probe: nothing", Emulator{}, 2, 0, 0},
		{"writes at the mix's price", Emulator{Mix: Mix{All: lvl}}, 2, 0, 2 * ms},
		// One read in four at the store probe's 6 ms: (3 x 2 + 6) / 4.
		{"reads at the store probe's", Emulator{Mix: Mix{All: lvl}, Task: StoreCycle{ReadCPU: 6 * ms}}, 3, 1, 3 * ms},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.p.MixDynamoCPU(c.writes, c.reads); got != c.wantCPU {
				t.Errorf("MixDynamoCPU = %v, want %v", got, c.wantCPU)
			}
		})
	}
}

func TestMixLevelsAddUpByTasks(t *testing.T) {
	var s levelSum
	// 100 tasks at 2 ms of DynamoDB Local, then 300 at 4 ms, 1 s each.
	s.add(MixLevel{Rate: 100, Dynamo: 2, JavaCPU: 2 * time.Millisecond}, 100, time.Second)
	s.add(MixLevel{Rate: 300, Dynamo: 2, JavaCPU: 4 * time.Millisecond}, 300, time.Second)
	l := s.level()
	near := func(d, want time.Duration) bool { return max(d-want, want-d) < time.Microsecond }
	if l.Rate != 200 || !near(l.JavaCPU, 3500*time.Microsecond) || !near(l.DynamoCPU(), 1750*time.Microsecond) {
		t.Errorf("level %+v: want 200 tasks/s, 3.5 ms a task, 1.75 ms a request", l)
	}
	if m := meanMix(Mix{Best: l}, Mix{}); m.Floor() != 200 {
		t.Errorf("a probe that measured nothing: floor %v, want the other's 200", m.Floor())
	}
}
