package emuprobe

import (
	"fmt"
	"time"
)

// FloorMeaning is what the floor the throughput is held to is, in one
// sentence.
const FloorMeaning = "the rate the emulators serve the no-op job's own requests (SQS batches of ten, each task's claim and commit), all at once on this machine's shared cores, with no framework around them: the mix probe's best level"

// Floor is the throughput a no-op job could reach on this machine, from
// the probes of each part alone (a diagnosis of which part is tightest;
// the verdict's floor is the mix probe's, which sees them compete): the least of the cores' capacity over the CPU the three
// processes sharing them spend per task (DynamoDB Local's and moto's CPU
// per request as probed, times the job's requests per task, and the
// runner's CPU per task) and each emulator's plateau over the job's
// requests per task to it.
type Floor struct {
	Rate float64 // tasks a second
	By   string  // what sets it
	// Cores is what the machine's other work and the emulators' idle
	// CPU left; CPU the three
	// processes' CPU per task, each given in Parts.
	Cores float64
	CPU   time.Duration
	Parts []string
}

// FloorOf is the floor of a job asking writes and reads DynamoDB requests
// and sqs SQS requests per task of emulators probed as p, whose runner
// spends runnerCPU per task.
func FloorOf(p Emulator, writes, reads, sqs float64, runnerCPU time.Duration) Floor {
	dynamo := writes + reads
	dcpu := p.DynamoCPU(writes, reads)
	var f Floor
	take := func(rate float64, by string) {
		if rate > 0 && (f.By == "" || rate < f.Rate) {
			f.Rate, f.By = rate, by
		}
	}
	emu := time.Duration(dynamo*float64(dcpu) + sqs*float64(p.SQS.CPU))
	if dcpu > 0 && p.SQS.CPU > 0 && runnerCPU > 0 && p.Dynamo.Cores > 0 {
		f.Cores, f.CPU = p.Dynamo.Cores-p.Idle.DynamoDB-p.Idle.SQS, emu+runnerCPU
		rate := max(0, f.Cores) / f.CPU.Seconds()
		f.Parts = append(f.Parts, fmt.Sprintf("cores: (%.2f left by other work - %.2f the emulators' idle) / (DynamoDB Local %.0f µs x %.2f (%.2f of them reads) + moto %.0f µs x %.2f + the runner %.0f µs) = %.0f tasks/s",
			p.Dynamo.Cores, p.Idle.DynamoDB+p.Idle.SQS, us(dcpu), dynamo, reads, us(p.SQS.CPU), sqs, us(runnerCPU), rate))
		take(rate, "the cores")
	}
	for _, s := range []struct {
		name string
		rate float64
		per  float64
	}{{"DynamoDB", p.Dynamo.Rate, dynamo}, {"SQS", p.SQS.Rate, sqs}} {
		if s.rate > 0 && s.per > 0 {
			f.Parts = append(f.Parts, fmt.Sprintf("%s's plateau: %.0f req/s / %.2f per task = %.0f tasks/s", s.name, s.rate, s.per, s.rate/s.per))
			take(s.rate/s.per, s.name+"'s plateau")
		}
	}
	return f
}
