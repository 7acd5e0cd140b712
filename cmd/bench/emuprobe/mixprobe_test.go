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
		name               string
		p                  Emulator
		writes, reads      float64
		wantCPU            time.Duration
		wantDynamo, wantSQ float64
	}{
		{"no mix probe: nothing", Emulator{}, 2, 0, 0, 0, 0},
		{"writes at the mix's price", Emulator{Mix: Mix{All: lvl}}, 2, 0, 2 * ms, 0, 0},
		// One read in four at the store probe's 6 ms: (3 x 2 + 6) / 4.
		{"reads at the store probe's", Emulator{Mix: Mix{All: lvl}, Task: StoreCycle{ReadCPU: 6 * ms}}, 3, 1, 3 * ms, 0, 0},
		// The most cores any level saw, before or after the job.
		{"the most cores seen", Emulator{Mix: Mix{All: lvl, DynamoCores: 0.4},
			Before: &Emulator{Dynamo: Ceiling{Levels: []Level{{Rate: 500, CPU: 2 * ms}}}, SQS: Ceiling{Levels: []Level{{Rate: 100, CPU: 9 * ms}}}},
			After:  &Emulator{Dynamo: Ceiling{Levels: []Level{{Rate: 600, CPU: 2 * ms}}}}}, 2, 0, 2 * ms, 1.2, 0.9},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.p.MixDynamoCPU(c.writes, c.reads); got != c.wantCPU {
				t.Errorf("MixDynamoCPU = %v, want %v", got, c.wantCPU)
			}
			if c.wantDynamo > 0 && abs(c.p.DynamoCores()-c.wantDynamo) > 1e-9 {
				t.Errorf("DynamoCores = %v, want %v", c.p.DynamoCores(), c.wantDynamo)
			}
			if c.wantSQ > 0 && abs(c.p.SQSCores()-c.wantSQ) > 1e-9 {
				t.Errorf("SQSCores = %v, want %v", c.p.SQSCores(), c.wantSQ)
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

func abs(x float64) float64 { return max(x, -x) }
