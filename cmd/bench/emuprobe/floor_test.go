package emuprobe

import (
	"math"
	"testing"
	"time"
)

func TestFloorOf(t *testing.T) {
	ms := time.Millisecond
	probed := func(cores, idle float64, write, read time.Duration, dynamoRate float64) Emulator {
		return Emulator{Dynamo: Ceiling{Rate: dynamoRate, CPU: write, Cores: cores}, SQS: Ceiling{Rate: 1000, CPU: 4 * ms},
			Task: StoreCycle{ReadCPU: read}, Idle: Idle{DynamoDB: idle / 2, SQS: idle / 2}}
	}
	for _, c := range []struct {
		name string
		p    Emulator
		// the job's DynamoDB writes and reads, SQS requests a task
		writes, reads, sqs float64
		runner             time.Duration
		rate               float64
		by                 string
	}{
		// 2 cores / (2 x 1 ms + 0.25 x 4 ms + 1 ms) = 2 / 4 ms.
		{"the cores", probed(2, 0, ms, 0, 2000), 2, 0, 0.25, ms, 500, "the cores"},
		// Half a core idle: 1.5 / 4 ms.
		{"the emulators' idle CPU is off the cores", probed(2, 0.5, ms, 0, 2000), 2, 0, 0.25, ms, 375, "the cores"},
		// Reads at 5 ms: 2 / (1.8 x 1 + 0.2 x 5 + 1 + 1) ms = 2 / 4.8 ms.
		{"reads at their own price", probed(2, 0, ms, 5*ms, 2000), 1.8, 0.2, 0.25, ms, 416.7, "the cores"},
		// 600 requests a second / 2 a task = 300, under the cores' 500.
		{"DynamoDB's plateau", probed(2, 0, ms, 0, 600), 2, 0, 0.25, ms, 300, "DynamoDB's plateau"},
		// No CPU measured: the plateaus alone.
		{"no CPU: the plateaus", Emulator{Dynamo: Ceiling{Rate: 800}, SQS: Ceiling{Rate: 90}}, 2, 0, 0.25, ms, 360, "SQS's plateau"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := FloorOf(c.p, c.writes, c.reads, c.sqs, c.runner)
			if math.Abs(f.Rate-c.rate) > 0.5 || f.By != c.by {
				t.Errorf("floor %.1f by %q; want %.1f by %q (%v)", f.Rate, f.By, c.rate, c.by, f.Parts)
			}
		})
	}
}
